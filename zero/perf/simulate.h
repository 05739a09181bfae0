// The step-time model: a dry run's operations (one schedule per pipeline
// stage, zero/run/dry_run.h) given op_time.h's durations and laid out in time
// by the one lay-out engine (zero/base/timeline.h, which states the rules: the
// CPU build's shared cores, and the data group's reductions on the compute
// lane for software that does not overlap them, the profile's
// software.overlap_data_parallel false: Megatron-LM's all-reduce after
// backward, DeepSpeed's overlap_comm off). A step is the thread's time from
// the end of one step to the end of the next (two are laid out: the second is
// the steady state); with a pipeline, the last stage to finish sets it.
//
// The breakdown says what each kind of work costs the step: the step laid
// out again with that kind taking no time, and the difference. The kinds
// overlap, so the parts need not add up to the step. A pipeline's bubble is
// the share of its stages' time in which their compute streams are idle.
#pragma once

#include <string>
#include <vector>

#include "zero/base/timeline.h"
#include "zero/perf/op_time.h"

// One rank's recorded steps (two: the second is the steady state), standing
// for its pipeline stage.
struct StepSchedule {
    MemoryQuery q;
    std::vector<StepOp> ops;
    size_t tokens_per_step = 0;  // over the data-parallel ranks
};

struct StepPrediction {
    double step_s = 0, tokens_per_s = 0;
    double flops = 0;             // per step per device: matmuls and attention, recomputation included
    double tflops_per_device = 0;
    double compute_only_s = 0;    // the step if nothing but the kernels took time
    double bubble = 0;            // pipelines: the stages' idle share
    std::vector<std::pair<std::string, double>> exposed;  // kind of work -> seconds it adds
    int ops = 0, interpolated = 0;  // operations in a step; how many had no measurement at their shape
    std::set<std::string> unmeasured;  // kernel kinds no measurement timed (op_time.h: as device copies)
    Timeline timeline;              // the two steps laid out (zero/base/timeline.h): the trace's times
};

// What kind of work an op is, for the breakdown.
inline const char* op_category(const StepOp& op) {
    std::string b = base_kind(op.name);
    if (op.kind == OpKind::Scalar) return "scalar reductions";
    if (op.p2p()) return "pipeline sends and receives";
    if (op.collective()) return op.group == "tensor" ? "tensor-parallel collectives" : "data-parallel collectives";
    if (op.transfer()) return "host transfers";
    if (op.disk()) return "disk reads and writes";
    if (b == "cpu_adamw" || b == "host_add" || b == "host_sumsq") return "CPU optimizer and host adds";
    return "compute";
}

// The step of a run whose stages' schedules are `stages` (q: the run's, any stage's); with `breakdown`, what
// each kind of work adds (a lay-out per kind).
inline StepPrediction predict_step(const std::vector<StepSchedule>& stages, const MemoryQuery& q, const Profile& prof,
                                   const Placement& pl, bool breakdown = true) {
    std::vector<std::vector<double>> dur;
    StepPrediction p;
    for (const StepSchedule& s : stages) {
        OpTimer timer(prof, s.q, pl);
        dur.push_back(std::vector<double>(s.ops.size()));
        for (size_t i = 0; i < s.ops.size(); i++) {
            dur.back()[i] = timer.seconds(s.ops[i]);
            if (s.ops[i].step == 1) p.flops += op_flops(s.ops[i].name, s.ops[i].dims), p.ops++;
        }
        p.interpolated += timer.interpolated / 2;
        p.unmeasured.insert(timer.unmeasured.begin(), timer.unmeasured.end());
    }
    bool sync = prof.synchronous && pl.emulated;
    const int P = q.pp();
    // the CPU build's emulated ranks share its cores (op_time.h timed each op with a core's share to itself)
    const double per_stage = (double)q.world * q.tp, capacity = std::max(1.0, (double)prof.cores / std::max(1, prof.cores / pl.world));
    if (sync) {
        const double over = OpTimer(prof, q, pl).oversubscribed;
        for (size_t s = 0; s < dur.size(); s++)
            for (size_t i = 0; i < dur[s].size(); i++)
                if (stages[s].ops[i].lane != Lane::Disk) dur[s][i] /= over;  // the disk is no core's
    }
    std::vector<const std::vector<StepOp>*> lists;
    for (const StepSchedule& s : stages) lists.push_back(&s.ops);
    LayoutRules rules;
    rules.synchronous = sync, rules.overlap_data = prof.overlap_data_parallel;
    if (sync) rules.capacity = capacity, rules.ranks_per_list = per_stage;
    auto step_time = [&](const std::vector<std::vector<double>>& d, Timeline* keep = nullptr) {
        const Timeline tl = lay_out(lists, d, rules);
        CHECK(tl.ran, "internal: the pipeline's schedules cannot run together");
        double a = 0, b = 0;
        for (const auto& st : tl.step_end) a = std::max(a, st[0]), b = std::max(b, st[1]);
        if (keep) *keep = tl;
        return b - a;
    };
    p.step_s = step_time(dur, &p.timeline);
    p.tokens_per_s = stages[0].tokens_per_step / p.step_s;
    // every stage's flops once per data and tensor rank: per device on a cluster, all on the emulated one
    p.flops *= pl.emulated ? (double)q.world * q.tp : 1.0 / P;
    p.tflops_per_device = p.flops / p.step_s / 1e12;
    for (double b : p.timeline.busy) p.bubble += (1.0 - b / p.step_s) / P;
    if (!breakdown) return p;
    std::vector<std::string> kinds;
    for (const StepSchedule& s : stages)
        for (const StepOp& op : s.ops)
            if (std::find(kinds.begin(), kinds.end(), op_category(op)) == kinds.end()) kinds.push_back(op_category(op));
    auto without = [&](const std::string& keep_or_drop, bool keep) {
        std::vector<std::vector<double>> d = dur;
        for (size_t s = 0; s < stages.size(); s++)
            for (size_t i = 0; i < d[s].size(); i++)
                if ((keep_or_drop == op_category(stages[s].ops[i])) != keep) d[s][i] = 0;
        return step_time(d);
    };
    p.compute_only_s = without("compute", true);
    for (const std::string& k : kinds)
        if (k != "compute") p.exposed.push_back({k, p.step_s - without(k, false)});
    return p;
}
