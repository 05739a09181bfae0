// Pipeline schedules, pure: what each stage runs, in its order, for one
// optimizer step of m micro-batches over P stages, and when it would run.
// Nothing here knows GPT-2, devices or ranks; a throughput model can call it.
//
// A schedule is, per stage, a list of slots (micro-batch, forward or backward).
// A stage runs its list in order; across stages a slot waits for its input:
//
//     F(s, i) after F(s-1, i)      the activations of micro-batch i come from stage s-1
//     B(s, i) after B(s+1, i)      their gradient comes back from stage s+1
//
// GPipe runs every forward, then every backward: a stage holds the
// activations of all m micro-batches at once. 1F1B (PipeDream-flush, Megatron's
// default) runs min(P-s-1, m) warm-up forwards, then alternates one forward and
// one backward, then cools down with the remaining backwards: stage s holds at
// most min(P-s, m) micro-batches' activations. Both leave the same idle time:
// with equal slots, (P-1) forward+backward times of every stage's
// (m+P-1), the bubble fraction (P-1)/(m+P-1).
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "zero/base/timeline.h"

enum class PipelineSchedule : int { OneFOneB, GPipe };

inline const char* pipeline_schedule_name(PipelineSchedule k) { return k == PipelineSchedule::GPipe ? "gpipe" : "1f1b"; }

struct PipeSlot {
    int micro = 0;
    bool backward = false;
    bool operator==(const PipeSlot& o) const { return micro == o.micro && backward == o.backward; }
};
using StageSlots = std::vector<PipeSlot>;

// Forwards stage s runs before its first backward.
inline int warmup_forwards(PipelineSchedule kind, int P, int s, int m) {
    return kind == PipelineSchedule::GPipe ? m : std::min(P - s - 1, m);
}

// The schedule: one slot list per stage.
inline std::vector<StageSlots> pipeline_schedule(PipelineSchedule kind, int P, int m) {
    std::vector<StageSlots> out(P);
    for (int s = 0; s < P; s++) {
        const int w = warmup_forwards(kind, P, s, m);
        StageSlots& slots = out[s];
        for (int i = 0; i < w; i++) slots.push_back({i, false});                         // warm-up
        for (int i = 0; i < m - w; i++) slots.push_back({w + i, false}), slots.push_back({i, true});  // 1F1B
        for (int i = m - w; i < m; i++) slots.push_back({i, true});                      // cool-down
    }
    return out;
}

// The most micro-batches whose activations a stage holds at once (forwards
// run, backwards not yet).
inline int in_flight_peak(const StageSlots& slots) {
    int now = 0, peak = 0;
    for (const PipeSlot& x : slots) peak = std::max(peak, now += x.backward ? -1 : 1);
    return peak;
}

// The bubble fraction of P stages and m micro-batches with equal slots: the
// share of each stage's time it waits.
inline double pipeline_bubble_formula(int P, int m) { return (P - 1.0) / (m + P - 1.0); }

// When each slot would run, given each slot's duration (durations[s][k] for
// slot k of stage s) and no time to move data: each stage's slots laid out by
// the one lay-out engine (zero/base/timeline.h) as a receive of the slot's
// input (from the stage before for a forward, after for a backward), its work
// and a send of its output. Empty if the schedule cannot run (a stage would
// wait for something that never comes).
struct SlotSpan {
    double start = 0, end = 0;
};
inline std::vector<std::vector<SlotSpan>> pipeline_timeline(const std::vector<StageSlots>& sched,
                                                            const std::vector<std::vector<double>>& durations) {
    const int P = (int)sched.size();
    std::vector<std::vector<StepOp>> ops(P);
    std::vector<std::vector<double>> dur(P);
    std::vector<std::vector<int>> work(P);  // each slot's op
    for (int s = 0; s < P; s++)
        for (size_t k = 0; k < sched[s].size(); k++) {
            auto add = [&](OpKind kind, int peer, double d) {
                if (peer < 0 || peer >= P) return;
                StepOp op = step_op(kind, Lane::Compute);
                op.peer = peer;
                ops[s].push_back(op), dur[s].push_back(d);
            };
            const bool backward = sched[s][k].backward;
            add(OpKind::Recv, backward ? s + 1 : s - 1, 0);
            work[s].push_back((int)ops[s].size());
            add(OpKind::Kernel, s, durations[s][k]);
            add(OpKind::Send, backward ? s - 1 : s + 1, 0);
        }
    std::vector<const std::vector<StepOp>*> lists;
    for (const std::vector<StepOp>& o : ops) lists.push_back(&o);
    const Timeline tl = lay_out(lists, dur);
    if (!tl.ran) return {};
    std::vector<std::vector<SlotSpan>> span(P);
    for (int s = 0; s < P; s++)
        for (int i : work[s]) span[s].push_back({tl.start[s][i], tl.end[s][i]});
    return span;
}

// 1 - busy time / (P x the time from the first start to the last end).
inline double timeline_bubble(const std::vector<std::vector<SlotSpan>>& span) {
    double busy = 0, first = 1e300, last = -1e300;
    for (const auto& st : span)
        for (const SlotSpan& x : st) busy += x.end - x.start, first = std::min(first, x.start), last = std::max(last, x.end);
    return span.empty() || last <= first ? 0.0 : 1.0 - busy / (span.size() * (last - first));
}

// The schedule as a reader sees it: each stage's slots in order, then the
// timeline with every slot one column long ("." where the stage waits).
inline std::string pipeline_schedule_text(PipelineSchedule kind, int P, int m) {
    std::vector<StageSlots> sched = pipeline_schedule(kind, P, m);
    auto name = [](const PipeSlot& x) { return std::string(x.backward ? "B" : "F") + std::to_string(x.micro); };
    std::string out = strf("%s schedule, %d stage(s), %d micro-batch(es): F = forward, B = backward of a micro-batch\n",
                           pipeline_schedule_name(kind), P, m);
    size_t width = 2;
    for (const StageSlots& st : sched)
        for (const PipeSlot& x : st) width = std::max(width, name(x).size());
    for (int s = 0; s < P; s++) {
        out += strf("stage %d (%d warm-up, at most %d in flight):", s, warmup_forwards(kind, P, s, m),
                    in_flight_peak(sched[s]));
        for (const PipeSlot& x : sched[s]) out += " " + name(x);
        out += "\n";
    }
    std::vector<std::vector<double>> unit(P);
    for (int s = 0; s < P; s++) unit[s].assign(sched[s].size(), 1.0);
    std::vector<std::vector<SlotSpan>> span = pipeline_timeline(sched, unit);
    out += strf("timeline, one column per slot: bubble %.3f = (P-1)/(m+P-1) = %.3f\n", timeline_bubble(span),
                pipeline_bubble_formula(P, m));
    double makespan = 0;
    for (const auto& st : span) makespan = std::max(makespan, st.back().end);
    for (int s = 0; s < P; s++) {
        std::string row((size_t)makespan * (width + 1), ' ');
        for (size_t t = 0; t < row.size(); t += width + 1) row[t + width - 1] = '.';
        for (size_t k = 0; k < sched[s].size(); k++) {
            std::string n = name(sched[s][k]);
            size_t at = (size_t)span[s][k].start * (width + 1);
            row.replace(at, width, std::string(width - n.size(), ' ') + n);
        }
        out += strf("stage %d |", s) + row.substr(0, row.find_last_not_of(' ') + 1) + "\n";
    }
    return out;
}
