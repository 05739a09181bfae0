// The pipeline bubble, measured. Every rank records each of its slots: how
// long the slot's own work took, and when it started and ended on the wall
// clock (zero/pipeline/stage_runner.h). Two readings follow:
//
//   measured: the slots' own times laid out by the schedule's dependencies,
//     each stage on a device of its own (pipeline_timeline): the bubble a
//     pipeline of these stages has, unequal stages and all. The slot's own
//     time is its rank thread's CPU time on the CPU build (the slot's span on
//     the rank's stream on the GPU), so emulated ranks that share cores do not
//     lengthen each other's slots.
//   wall clock: the same slots as they ran here. With fewer cores than ranks
//     this is not a pipeline's bubble: a rank that waits sleeps and frees its
//     core, and the busy ranks run faster while others wait than when all are
//     busy, so the idle time shrinks.
//
// Either is 1 - (busy time) / (P x span from the first start to the last end);
// with equal slots it is the formula (P-1)/(m+P-1).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/comm/comm.h"
#include "zero/pipeline/schedule.h"
#include "zero/pipeline/stage_runner.h"

struct PipelineBubble {
    int P = 1, m = 1;
    PipelineSchedule kind = PipelineSchedule::OneFOneB;
    double measured = 0, wall = 0, formula = 0;
    std::vector<StageSlots> schedule;
    std::vector<std::vector<double>> busy;          // [stage][slot] ms, mean over the timed steps
    std::vector<std::vector<SlotSpan>> timeline;    // laid out as on P devices
    std::vector<std::vector<SlotSpan>> wall_spans;  // as they ran here
};

// Every stage's slot times (means over the timed steps), gathered at every rank
// of the pipeline group: one scalar reduction per value, once per run.
inline PipelineBubble measure_bubble(Comm& pipe, PipelineSchedule kind, int m, const SlotTimes& mine) {
    PipelineBubble b{.P = pipe.world, .m = m, .kind = kind, .formula = pipeline_bubble_formula(pipe.world, m),
                     .schedule = pipeline_schedule(kind, pipe.world, m)};
    const double n = mine.steps > 0 ? mine.steps : 1;
    b.busy.resize(b.P), b.wall_spans.resize(b.P);
    for (int st = 0; st < b.P; st++)
        for (size_t k = 0; k < b.schedule[st].size(); k++) {
            // stage st's mean of slot k, everywhere (in this order on every rank: busy, start, end)
            auto mean = [&](const std::vector<double>& v) { return pipe.sum_scalar(st == pipe.rank ? v[k] / n : 0.0); };
            b.busy[st].push_back(mean(mine.busy));
            b.wall_spans[st].push_back({mean(mine.start), mean(mine.end)});
        }
    b.timeline = pipeline_timeline(b.schedule, b.busy);
    b.measured = timeline_bubble(b.timeline);
    // the wall clock's: busy = each slot's wall span
    b.wall = timeline_bubble(b.wall_spans);
    return b;
}

inline void print_bubble_line(const PipelineBubble& b, int ranks_per_process, int cores, FILE* out) {
    fprintf(out,
            "pipeline bubble (%s, %d stages, %d micro-batches): measured %.3f (each slot's own %s time, laid out "
            "by the schedule as on %d devices) beside (P-1)/(m+P-1) = %.3f; the wall clock here %.3f",
            pipeline_schedule_name(b.kind), b.P, b.m, b.measured,
#ifdef ZERO_CUDA
            "GPU",
#else
            "CPU",
#endif
            b.P, b.formula, b.wall);
    if (ranks_per_process > cores)
        fprintf(out, " (%d ranks on %d cores: a waiting rank frees its core for a busy one)", ranks_per_process, cores);
    fprintf(out, "\n");
}

// Rows stage,slot,micro,pass,busy_ms,start_ms,end_ms,wall_start_ms,wall_end_ms: the
// slots laid out as on P devices (start, end) and as they ran here (wall_*).
inline void write_bubble_csv(const std::string& path, const PipelineBubble& b) {
    std::string text = "stage,slot,micro,pass,busy_ms,start_ms,end_ms,wall_start_ms,wall_end_ms\n";
    for (int st = 0; st < b.P; st++)
        for (size_t k = 0; k < b.schedule[st].size(); k++) {
            const PipeSlot& x = b.schedule[st][k];
            text += strf("%d,%zu,%d,%s,%.6f,%.6f,%.6f,%.6f,%.6f\n", st, k, x.micro, x.backward ? "backward" : "forward",
                         b.busy[st][k], b.timeline[st][k].start, b.timeline[st][k].end, b.wall_spans[st][k].start,
                         b.wall_spans[st][k].end);
        }
    write_file_atomically(path, text);
}
