// One lay-out engine: ranks' recorded ops (zero/base/ops.h), each with a
// duration, placed in time as the rank's thread and its streams run them.
// The step-time model (zero/perf/simulate.h), the pipeline's slot timeline
// (zero/pipeline/schedule.h) and the trace (zero/perf/trace.h) all come
// from here; the rules below exist nowhere else.
//
// One list per rank (a pipeline stage's, or one standing for a stage's ranks):
//   * the rank's thread walks its list in order. It runs host work and host
//     waits itself (lane Host), held by each until it ends; any other op it
//     issues to that op's lane and goes on at once;
//   * each lane runs its ops one after another, in list order; an op starts
//     once it is issued, its lane is free and the ops in its `after` have ended;
//   * a receive starts no earlier than the send it meets has started (the
//     k-th send from rank a to rank b meets b's k-th receive from a; the
//     transfer's time is the receive's);
//   * a scalar reduction over the pipeline group starts once every rank's
//     thread has reached its own (the k-th meets every rank's k-th).
// Rules a run may add: synchronous (the CPU build: every lane but the disk's is
// the thread), data collectives on the compute lane (software that does not
// overlap them; the ops after one on its own stream still wait for it, as a
// stream runs in order), and shared cores (the CPU build's emulated ranks: while k
// ranks' threads are busy each runs at min(1, capacity / (k x ranks_per_list))
// of its speed; a rank waiting for a receive, a reduction or the disk leaves
// its share to the others).
#pragma once

#include <algorithm>
#include <deque>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "zero/base/ops.h"

struct LayoutRules {
    bool synchronous = false;   // every lane but the disk's is the rank's thread
    bool overlap_data = true;   // false: the data group's collectives take the compute lane
    double capacity = 0;        // shared cores (synchronous only): ranks the cores hold at once; 0: no sharing
    double ranks_per_list = 1;  // how many ranks each list stands for, sharing the cores
};

struct Timeline {
    bool ran = true;  // false: the lists cannot run together (one waits for what never comes)
    std::vector<std::vector<double>> start, end;  // per list, per op
    std::vector<std::vector<double>> step_end;    // per list: the thread's time at the end of each step
    std::vector<double> busy;                     // per list: its compute lane's time in its last step
    std::vector<std::vector<Lane>> lane;          // per list, per op: the lane it ran on (the rules' choice)
    LayoutRules rules;                            // the rules it was laid out by
};

// What runs a timeline's lanes, in words (a trace says it).
inline std::string lanes_in_words(const LayoutRules& rules) {
    if (rules.synchronous) return "every lane but the disk's is the rank's thread: one op at a time, in list order";
    return std::string("each lane runs by itself (device streams, host threads)") +
           (rules.overlap_data ? "" : "; the data group's collectives on the compute stream (software that does not "
                                      "overlap them with compute)");
}

inline Timeline lay_out(const std::vector<const std::vector<StepOp>*>& lists, const std::vector<std::vector<double>>& dur,
                        const LayoutRules& rules = {}) {
    const int P = (int)lists.size();
    const double NONE = -1;
    Timeline tl;
    tl.rules = rules;
    tl.start.resize(P), tl.end.resize(P), tl.step_end.resize(P), tl.busy.assign(P, 0.0), tl.lane.resize(P);
    struct Rank {
        size_t next = 0;                        // the thread's next op to issue
        std::deque<int> queued[NUM_LANES];      // issued, not started
        int running[NUM_LANES];                 // the op on each lane, or -1
        std::vector<double> left, issued;       // per op: work left (seconds at full speed); when issued
        int pipe_scalars = 0;                   // pipeline scalars the thread has started
    };
    std::vector<Rank> r(P);
    std::map<std::pair<int, int>, std::vector<double>> sent;  // (from, to): each send's start, in order
    std::map<std::pair<int, int>, int> received;             // (from, to): receives started
    std::vector<std::vector<double>> arrived;                // per pipeline scalar: each list's thread there since
    auto lane_of = [&](const StepOp& op) {
        if (rules.synchronous && op.lane != Lane::Disk) return Lane::Host;
        if (!rules.overlap_data && op.group == "data" && op.collective() && op.kind != OpKind::Scalar) return Lane::Compute;
        return op.lane;
    };
    std::vector<std::vector<int>> stream_before(P);  // per op: the op before it on its own stream (-1: none)
    for (int s = 0; s < P; s++) {
        const size_t n = lists[s]->size();
        int last[NUM_LANES];
        std::fill(last, last + NUM_LANES, -1);
        for (size_t i = 0; i < n; i++) {
            const StepOp& op = (*lists[s])[i];
            tl.lane[s].push_back(lane_of(op));
            stream_before[s].push_back(op.lane == Lane::Host ? -1 : std::exchange(last[(int)op.lane], (int)i));
        }
        tl.start[s].assign(n, NONE), tl.end[s].assign(n, NONE);
        r[s].left = dur[s], r[s].issued.assign(n, NONE);
        std::fill(r[s].running, r[s].running + NUM_LANES, -1);
    }
    double t = 0;
    auto ready = [&](int s, int i) {  // its waits and its stream's op before it have ended; a receive's send has started
        const StepOp& op = (*lists[s])[i];
        for (int a : op.after)
            if (tl.end[s][a] == NONE) return false;
        if (const int b = stream_before[s][i]; b >= 0 && tl.end[s][b] == NONE) return false;
        return op.kind != OpKind::Recv || received[{op.peer, s}] < (int)sent[{op.peer, s}].size();
    };
    auto start = [&](int s, int i, Lane lane) {
        const StepOp& op = (*lists[s])[i];
        if (op.kind == OpKind::Recv) received[{op.peer, s}]++;
        if (op.kind == OpKind::Send) sent[{s, op.peer}].push_back(t);
        tl.start[s][i] = t;
        r[s].running[(int)lane] = i;
    };
    auto finish = [&](int s, Lane lane) {
        const int i = r[s].running[(int)lane];
        tl.end[s][i] = t;
        r[s].running[(int)lane] = -1;
    };
    for (;;) {
        for (bool changed = true; changed;) {  // start what can start now; what takes no time ends now
            changed = false;
            for (int s = 0; s < P; s++) {
                Rank& k = r[s];
                const std::vector<StepOp>& ops = *lists[s];
                while (k.next < ops.size() && k.running[(int)Lane::Host] < 0) {  // the thread issues
                    const int i = (int)k.next;
                    const Lane lane = tl.lane[s][i];
                    if (lane != Lane::Host) {
                        k.queued[(int)lane].push_back(i), k.issued[i] = t, k.next++, changed = true;
                        continue;
                    }
                    if (!ready(s, i)) break;
                    if (ops[i].kind == OpKind::Scalar && ops[i].group == "pipe") {  // every list at its own
                        if ((int)arrived.size() <= k.pipe_scalars) arrived.push_back(std::vector<double>(P, NONE));
                        std::vector<double>& at = arrived[k.pipe_scalars];
                        if (at[s] == NONE) at[s] = t;
                        if (std::count(at.begin(), at.end(), NONE) > 0) break;
                        k.pipe_scalars++;
                    }
                    k.issued[i] = t, k.next++, changed = true;
                    start(s, i, lane);
                }
                for (int l = 0; l < NUM_LANES; l++)  // the lanes start their next op
                    while (l != (int)Lane::Host && k.running[l] < 0 && !k.queued[l].empty() &&
                           ready(s, k.queued[l].front())) {
                        start(s, k.queued[l].front(), (Lane)l), k.queued[l].pop_front(), changed = true;
                        if (k.left[k.running[l]] <= 0) finish(s, (Lane)l);
                    }
                if (k.running[(int)Lane::Host] >= 0 && k.left[k.running[(int)Lane::Host]] <= 0)
                    finish(s, Lane::Host), changed = true;
            }
        }
        // the ops running, and at what speed
        int busy_threads = 0;
        for (const Rank& k : r) busy_threads += k.running[(int)Lane::Host] >= 0;
        const double shared = rules.capacity > 0
                                  ? std::min(1.0, rules.capacity / (std::max(busy_threads, 1) * rules.ranks_per_list))
                                  : 1.0;
        double dt = 1e300;
        for (const Rank& k : r)
            for (int l = 0; l < NUM_LANES; l++)
                if (k.running[l] >= 0) dt = std::min(dt, k.left[k.running[l]] / (l == (int)Lane::Host ? shared : 1.0));
        if (dt == 1e300) break;  // nothing runs: done, or stuck
        t += dt;
        for (int s = 0; s < P; s++)
            for (int l = 0; l < NUM_LANES; l++) {
                const int i = r[s].running[l];
                if (i < 0) continue;
                double& left = r[s].left[i];
                left -= dt * (l == (int)Lane::Host ? shared : 1.0);
                if (left <= 1e-12 * std::max(1.0, t)) left = 0, finish(s, (Lane)l);
            }
    }
    for (int s = 0; s < P; s++) {
        const std::vector<StepOp>& ops = *lists[s];
        for (size_t i = 0; i < ops.size(); i++) {
            if (tl.end[s][i] == NONE) {
                tl.ran = false;
                continue;
            }
            // the thread's time when it has passed op i: a host op's end, else when it issued it
            const double passed = tl.lane[s][i] == Lane::Host ? tl.end[s][i] : r[s].issued[i];
            if (i + 1 == ops.size() || ops[i + 1].step != ops[i].step) tl.step_end[s].push_back(passed);
            if (ops[i].lane == Lane::Compute && ops[i].step == ops.back().step)
                tl.busy[s] += tl.end[s][i] - tl.start[s][i];
        }
    }
    return tl;
}
