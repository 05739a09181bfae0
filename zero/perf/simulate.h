// The step-time model: a dry run's operations (one schedule per pipeline
// stage, zero/run/dry_run.h) laid out in time (op_time.h's durations), as
// the streams run them.
//
// Each lane runs its operations one after another; an operation starts once
// its lane is free, the ops it waits for have ended and the rank's thread has
// issued it (the thread reaches it in list order, and is held by host work and
// host waits). In the CPU build every lane but the disk's is the rank's thread,
// so the step is the sum of those operations; on a GPU, communication on the
// comm stream runs beside the compute stream's kernels, as far as the engine's
// events let it. The disk's reads and writes (NVMe offload) run beside the
// thread in both builds, as the I/O threads do, until a host wait needs one.
// With a pipeline every stage is laid out beside the others: a receive starts
// no earlier than its send (the k-th send from stage a to b meets b's k-th
// receive from a), and the scalar reductions over the pipeline group wait for
// every stage, as the ranks do. A step is the thread's time from the end of one
// step to the end of the next (two are laid out: the second is the steady
// state); with a pipeline, the last stage to finish sets it.
//
// The breakdown says what each kind of work costs the step: the step laid
// out again with that kind taking no time, and the difference. The kinds
// overlap, so the parts need not add up to the step. A pipeline's bubble is
// the share of its stages' time in which their compute streams are idle.
//
// Software that does not overlap the data group's reductions with the
// backward pass (the profile's software.overlap_data_parallel false:
// Megatron-LM's all-reduce after backward, DeepSpeed's overlap_comm off) has
// them laid out on the compute lane, in the order the engine issues them.
#pragma once

#include <map>
#include <string>
#include <vector>

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
};

// What kind of work an op is, for the breakdown.
inline const char* op_category(const StepOp& op) {
    std::string b = base_kind(op.kind);
    if (op.kind == "scalar") return "scalar reductions";
    if (op.p2p()) return "pipeline sends and receives";
    if (op.collective()) return op.group == "tensor" ? "tensor-parallel collectives" : "data-parallel collectives";
    if (op.transfer()) return "host transfers";
    if (op.kind == "disk_read" || op.kind == "disk_write") return "disk reads and writes";
    if (b == "cpu_adamw" || b == "host_add" || b == "host_sumsq") return "CPU optimizer and host adds";
    return "compute";
}

// The thread's time at the end of each step, per stage, given each op's
// duration; busy[s]: stage s's compute-lane time in its last step.
inline std::vector<std::vector<double>> lay_out(const std::vector<StepSchedule>& stages,
                                                const std::vector<std::vector<double>>& dur, bool synchronous,
                                                std::vector<double>* busy = nullptr, bool overlap_data = true) {
    const int P = (int)stages.size();
    struct Rank {
        std::vector<double> end;
        double lane_free[NUM_LANES] = {}, host = 0;
        size_t next = 0;
        int scalars = 0;  // pipeline-group scalars passed
        std::vector<double> step_end;
    };
    std::vector<Rank> r(P);
    std::map<std::pair<int, int>, std::vector<double>> sent;  // (from, to) -> each send's start, in order
    std::map<std::pair<int, int>, int> received;
    std::vector<std::vector<double>> scalar_arrival;          // per pipeline scalar: each stage's ready time
    if (busy) busy->assign(P, 0.0);
    for (int s = 0; s < P; s++) r[s].end.assign(stages[s].ops.size(), 0.0);
    auto place = [&](int s, size_t i, double earliest) {  // start op i of stage s no earlier than `earliest`
        const StepOp& op = stages[s].ops[i];
        Rank& k = r[s];
        int lane = synchronous && op.lane != Lane::Disk ? (int)Lane::Host : (int)op.lane;
        if (!overlap_data && op.group == "data" && op.collective() && op.kind != "scalar") lane = (int)Lane::Compute;
        double start = std::max(earliest, lane == (int)Lane::Host ? k.host : std::max(k.host, k.lane_free[lane]));
        for (int a : op.after) start = std::max(start, k.end[a]);
        k.end[i] = start + dur[s][i];
        if (lane == (int)Lane::Host) k.host = k.end[i];
        else k.lane_free[lane] = k.end[i];
        if (op.kind == "send") sent[{s, op.peer}].push_back(start);
        if (busy && op.lane == Lane::Compute && op.step == stages[s].ops.back().step) (*busy)[s] += dur[s][i];
        if (i + 1 == stages[s].ops.size() || stages[s].ops[i + 1].step != op.step) k.step_end.push_back(k.host);
    };
    for (bool progress = true; progress;) {
        progress = false;
        for (int s = 0; s < P; s++)
            while (r[s].next < stages[s].ops.size()) {
                const StepOp& op = stages[s].ops[r[s].next];
                double earliest = 0;
                if (op.kind == "recv") {  // not before its send
                    auto& q = sent[{op.peer, s}];
                    int& n = received[{op.peer, s}];
                    if (n >= (int)q.size()) break;
                    earliest = q[n++];
                } else if (op.kind == "scalar" && op.group == "pipe") {  // every stage arrives first
                    int k = r[s].scalars;
                    if ((int)scalar_arrival.size() <= k) scalar_arrival.push_back(std::vector<double>(P, -1.0));
                    if (scalar_arrival[k][s] < 0) scalar_arrival[k][s] = r[s].host;
                    double all = 0;
                    for (double t : scalar_arrival[k]) all = t < 0 ? -1 : std::max(all, t);
                    if (all < 0) break;
                    earliest = all;
                    r[s].scalars++;
                }
                place(s, r[s].next++, earliest);
                progress = true;
            }
    }
    std::vector<std::vector<double>> ends;
    for (int s = 0; s < P; s++) {
        CHECK(r[s].next == stages[s].ops.size(), "internal: the pipeline's schedules cannot run together");
        ends.push_back(r[s].step_end);
    }
    return ends;
}

// The same for emulated ranks of the CPU build, whose every lane but the disk's
// is the rank's own thread: each stage's ops in order, standing for its
// ranks_per_stage ranks, which share the CPU's cores. An op's duration is what
// it takes with a core (or its threads' cores) to itself; while k ranks are
// busy, each runs at min(1, capacity / k) of that speed (capacity: how many
// ranks the cores hold at once). A rank waiting for a receive, at a barrier or
// for the disk leaves its share to the others: a pipeline's idle stages lend
// their cores to its busy ones. A disk op costs its rank's thread nothing: it
// starts on the stage's disk lane once issued, the lane free and the ops it
// waits for done (op_time.h's duration already shares the disk among the ranks).
inline std::vector<std::vector<double>> lay_out_shared(const std::vector<StepSchedule>& stages,
                                                       const std::vector<std::vector<double>>& dur,
                                                       double ranks_per_stage, double capacity,
                                                       std::vector<double>* busy = nullptr) {
    const int P = (int)stages.size();
    const double NOT_STARTED = -1;
    std::vector<size_t> next(P, 0);
    std::vector<double> left(P, NOT_STARTED), disk_free(P, 0.0);
    std::vector<std::vector<double>> end(P);  // each op's end, once known
    std::vector<int> scalars(P, 0);
    std::vector<std::vector<double>> ends(P);
    std::map<std::pair<int, int>, std::vector<double>> sent;
    std::map<std::pair<int, int>, int> received;
    if (busy) busy->assign(P, 0.0);
    for (int s = 0; s < P; s++) end[s].assign(stages[s].ops.size(), 0.0);
    double t = 0;
    auto finish = [&](int s, double at) {
        const std::vector<StepOp>& ops = stages[s].ops;
        if (ops[next[s]].kind == "send") sent[{s, ops[next[s]].peer}].push_back(t);
        if (next[s] + 1 == ops.size() || ops[next[s] + 1].step != ops[next[s]].step) ends[s].push_back(t);
        end[s][next[s]++] = at, left[s] = NOT_STARTED;
    };
    auto ready_at = [&](int s) {  // when the ops the next op waits for are done (only disk ops end after t)
        double r = 0;
        for (int a : stages[s].ops[next[s]].after) r = std::max(r, end[s][a]);
        return r;
    };
    for (;;) {
        for (bool changed = true; changed;) {  // start what can start; zero-time ops end at once
            changed = false;
            for (int s = 0; s < P; s++) {
                if (next[s] >= stages[s].ops.size() || left[s] != NOT_STARTED) continue;
                const StepOp& op = stages[s].ops[next[s]];
                if (op.lane == Lane::Disk) {  // issued: on the disk lane, the thread goes on
                    disk_free[s] = std::max({t, disk_free[s], ready_at(s)}) + dur[s][next[s]];
                    finish(s, disk_free[s]), changed = true;
                    continue;
                }
                if (ready_at(s) > t) continue;  // a host wait for the disk
                if (op.kind == "recv") {
                    auto& q = sent[{op.peer, s}];
                    if (received[{op.peer, s}] >= (int)q.size()) continue;
                    received[{op.peer, s}]++;
                } else if (op.kind == "scalar" && op.group == "pipe") {  // every stage at its k-th such scalar
                    bool all = true;
                    for (int o = 0; o < P; o++) {
                        bool there = next[o] < stages[o].ops.size() && stages[o].ops[next[o]].kind == "scalar" &&
                                     stages[o].ops[next[o]].group == "pipe" && scalars[o] == scalars[s];
                        all = all && there;
                    }
                    if (!all) continue;
                    for (int o = 0; o < P; o++) scalars[o]++, left[o] = dur[o][next[o]];
                    changed = true;
                    continue;
                }
                left[s] = dur[s][next[s]];
                changed = true;
            }
            for (int s = 0; s < P; s++)
                if (left[s] == 0) finish(s, t), changed = true;
        }
        int active = 0;
        double wake = 1e300;  // the first disk op a waiting stage needs
        for (int s = 0; s < P; s++) {
            active += left[s] > 0;
            const double ready = left[s] == NOT_STARTED && next[s] < stages[s].ops.size() ? ready_at(s) : 0;
            if (ready > t) wake = std::min(wake, ready);
        }
        if (active == 0 && wake == 1e300) break;
        double rate = std::min(1.0, capacity / (std::max(active, 1) * ranks_per_stage)), dt = wake - t;
        for (int s = 0; s < P; s++)
            if (left[s] > 0) dt = std::min(dt, left[s] / rate);
        t += dt;
        for (int s = 0; s < P; s++) {
            if (left[s] <= 0) continue;
            const StepOp& op = stages[s].ops[next[s]];
            if (busy && op.lane == Lane::Compute && op.step == stages[s].ops.back().step) (*busy)[s] += dt;
            left[s] = std::max(0.0, left[s] - rate * dt);
            if (left[s] <= 1e-15) finish(s, t);
        }
    }
    for (int s = 0; s < P; s++)
        CHECK(next[s] == stages[s].ops.size(), "internal: the pipeline's schedules cannot run together");
    return ends;
}

// The step of a run whose stages' schedules are `stages` (q: the run's, any stage's).
inline StepPrediction predict_step(const std::vector<StepSchedule>& stages, const MemoryQuery& q, const Profile& prof,
                                   const Placement& pl) {
    std::vector<std::vector<double>> dur;
    StepPrediction p;
    for (const StepSchedule& s : stages) {
        OpTimer timer(prof, s.q, pl);
        dur.push_back(std::vector<double>(s.ops.size()));
        for (size_t i = 0; i < s.ops.size(); i++) {
            dur.back()[i] = timer.seconds(s.ops[i]);
            if (s.ops[i].step == 1) p.flops += op_flops(s.ops[i].kind, s.ops[i].dims), p.ops++;
        }
        p.interpolated += timer.interpolated / 2;
    }
    bool sync = prof.synchronous && pl.emulated;
    const int P = q.pp();
    // the CPU build's emulated ranks share its cores (op_time.h timed each op with a core's share to itself)
    const double per_stage = (double)q.world * q.tp, capacity = std::max(1.0, (double)prof.cores / std::max(1, prof.cores / pl.world));
    if (sync) {
        const double over = OpTimer(prof, q, pl).oversubscription();
        for (size_t s = 0; s < dur.size(); s++)
            for (size_t i = 0; i < dur[s].size(); i++)
                if (stages[s].ops[i].lane != Lane::Disk) dur[s][i] /= over;  // the disk is no core's
    }
    auto step_time = [&](const std::vector<std::vector<double>>& d, std::vector<double>* busy = nullptr) {
        std::vector<std::vector<double>> e = sync ? lay_out_shared(stages, d, per_stage, capacity, busy)
                                                  : lay_out(stages, d, sync, busy, prof.overlap_data_parallel);
        double a = 0, b = 0;
        for (const auto& st : e) a = std::max(a, st[0]), b = std::max(b, st[1]);
        return b - a;
    };
    std::vector<double> busy;
    p.step_s = step_time(dur, &busy);
    p.tokens_per_s = stages[0].tokens_per_step / p.step_s;
    // every stage's flops once per data and tensor rank: per device on a cluster, all on the emulated one
    p.flops *= pl.emulated ? (double)q.world * q.tp : 1.0 / P;
    p.tflops_per_device = p.flops / p.step_s / 1e12;
    for (double b : busy) p.bubble += (1.0 - b / p.step_s) / P;
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
