// The step-time model's second half: the schedule's operations (step_ops.h)
// laid out in time (op_time.h's durations), as the streams run them.
//
// Each lane runs its operations one after another; an operation starts once
// its lane is free, the ops it waits for have ended and the rank's thread has
// issued it (the thread reaches it in list order, and is held by host work and
// host waits). In the CPU build every lane is the rank's thread, so the step is
// the sum of its operations; on a GPU, communication on the comm stream runs
// beside the compute stream's kernels, as far as the engine's events let it.
// A step is the thread's time from the end of one step to the end of the next
// (two are laid out: the second is the steady state).
//
// The breakdown says what each kind of work costs the step: the step laid
// out again with that kind taking no time, and the difference. The kinds
// overlap, so the parts need not add up to the step.
#pragma once

#include <string>
#include <vector>

#include "zero/perf/op_time.h"
#include "zero/perf/step_ops.h"

struct StepPrediction {
    double step_s = 0, tokens_per_s = 0;
    double flops = 0;             // per step per device: matmuls and attention, recomputation included
    double tflops_per_device = 0;
    double compute_only_s = 0;    // the step if nothing but the kernels took time
    std::vector<std::pair<std::string, double>> exposed;  // kind of work -> seconds it adds
    int ops = 0, interpolated = 0;  // operations in a step; how many had no measurement at their shape
};

// What kind of work an op is, for the breakdown.
inline const char* op_category(const StepOp& op) {
    std::string b = base_kind(op.kind);
    if (op.kind == "scalar") return "scalar reductions";
    if (op.collective()) return op.group == "tensor" ? "tensor-parallel collectives" : "data-parallel collectives";
    if (op.transfer()) return "host transfers";
    if (b == "cpu_adamw" || b == "host_add" || b == "host_sumsq") return "CPU optimizer and host adds";
    return "compute";
}

// The thread's time at the end of each step, given each op's duration.
inline std::vector<double> lay_out(const StepSchedule& s, const std::vector<double>& dur, bool synchronous) {
    std::vector<double> end(s.ops.size(), 0.0);
    double lane_free[4] = {0, 0, 0, 0}, host = 0;
    std::vector<double> step_end;
    for (size_t i = 0; i < s.ops.size(); i++) {
        const StepOp& op = s.ops[i];
        int lane = synchronous ? (int)Lane::Host : (int)op.lane;
        double start = lane == (int)Lane::Host ? host : std::max(host, lane_free[lane]);
        for (int a : op.after) start = std::max(start, end[a]);
        end[i] = start + dur[i];
        if (lane == (int)Lane::Host) host = end[i];
        else lane_free[lane] = end[i];
        if (i + 1 == s.ops.size() || s.ops[i + 1].step != op.step) step_end.push_back(host);
    }
    return step_end;
}

inline StepPrediction predict_step(const MemoryQuery& q, const Profile& prof, const Placement& pl) {
    StepSchedule s = step_schedule(q, 2);
    OpTimer timer(prof, q, pl);
    std::vector<double> dur(s.ops.size());
    StepPrediction p;
    for (size_t i = 0; i < s.ops.size(); i++) {
        dur[i] = timer.seconds(s.ops[i]);
        if (s.ops[i].step == 1) p.flops += op_flops(s.ops[i].kind, s.ops[i].dims), p.ops++;
    }
    p.interpolated = timer.interpolated / 2;
    bool sync = prof.synchronous && pl.emulated;
    auto step_time = [&](const std::vector<double>& d) {
        std::vector<double> e = lay_out(s, d, sync);
        return e[1] - e[0];
    };
    p.step_s = step_time(dur);
    p.tokens_per_s = s.tokens_per_step / p.step_s;
    if (pl.emulated) p.flops *= pl.world;  // every rank's work on the one device
    p.tflops_per_device = p.flops / p.step_s / 1e12;
    std::vector<std::string> kinds;
    for (const StepOp& op : s.ops)
        if (std::find(kinds.begin(), kinds.end(), op_category(op)) == kinds.end()) kinds.push_back(op_category(op));
    std::vector<double> only(dur);
    for (size_t i = 0; i < s.ops.size(); i++)
        if (std::string(op_category(s.ops[i])) != "compute") only[i] = 0;
    p.compute_only_s = step_time(only);
    for (const std::string& k : kinds) {
        if (k == "compute") continue;
        std::vector<double> without(dur);
        for (size_t i = 0; i < s.ops.size(); i++)
            if (k == op_category(s.ops[i])) without[i] = 0;
        p.exposed.push_back({k, p.step_s - step_time(without)});
    }
    return p;
}
