// make reproduce's part `pipeline`: the pipeline bubble, measured. Trainer
// runs of a small GPT-2 with equal stages (as many layers each, a vocabulary
// too small for the LM head to weigh) on a synthetic token shard:
//   pipeline_timeline.png/csv: one step of 4 stages and 8 micro-batches under
//     1F1B and under GPipe, each slot a box where the run's slot times place it
//     (zero/pipeline/bubble.h: each slot's own time, laid out as on 4 devices);
//   pipeline_bubble.png/csv: the bubble against m for P = 2, 4, 8, measured
//     beside (P-1)/(m+P-1).
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/base/rng.h"
#include "zero/reproduce/report.h"
#include "zero/reproduce/run_command.h"

struct PipelineSettings {
    std::string trainer;
    std::string model = "L=8,H=4,C=128,V=64,T=64";  // 8 layers: 1 to 4 per stage at P = 8 to 2
    int micro_batch = 8, seq_len = 64, steps = 5;   // the first step warms up: not timed
};

struct BubbleRun {
    int P = 0, m = 0;
    std::string schedule;
    bool ran = false;
    std::string why, dir;
    double measured = NAN, wall = NAN;
    CsvTable timeline;  // the run's pipeline_timeline.csv
};

// Tokens from a sparse Markov chain over V tokens, as the tests' shards.
inline void write_pipeline_tokens(const std::string& path, int V, size_t n) {
    std::vector<uint16_t> tokens(n);
    Rng rng(11);
    uint32_t t = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rng.next_u32();
        t = (r & 3) == 0 ? r % V : (t * 7 + 13 + (r >> 8) % 3) % V;
        tokens[i] = (uint16_t)t;
    }
    write_shard(path, tokens.data(), n);
}

inline BubbleRun run_pipeline(const PipelineSettings& s, const std::string& dir, const std::string& tokens, int P, int m,
                              const std::string& schedule) {
    BubbleRun b{.P = P, .m = m, .schedule = schedule};
    b.dir = dir + "/runs/pipeline_" + schedule + "_p" + std::to_string(P) + "_m" + std::to_string(m);
    run_logged("rm -rf '" + b.dir + "'", "/dev/null");
    const std::string cmd =
        strf("%s -e %s -i %s -j '' -b %d -t %d -d %d -x %d -z 1 --ranks %d --pp %d --pp_schedule %s -v 0 -s 0 -n -1 "
             "-o %s",
             s.trainer.c_str(), s.model.c_str(), tokens.c_str(), s.micro_batch, s.seq_len,
             s.micro_batch * s.seq_len * m, s.steps, P, P, schedule.c_str(), b.dir.c_str());
    CommandRun r = run_logged(cmd, b.dir + ".log");
    std::string line = line_with(r.output, "pipeline bubble (");
    if (r.status != 0 || line.empty()) {
        b.why = failure_reason(r);
        return b;
    }
    b.ran = true;
    size_t at = line.find("measured ");
    b.measured = atof(line.c_str() + at + 9);
    at = line.find("the wall clock here ");
    b.wall = atof(line.c_str() + at + 20);
    b.timeline = read_csv_table(b.dir + "/pipeline_timeline.csv");
    return b;
}

// Slot boxes of one run's pipeline_timeline.csv, a row per stage.
inline Chart timeline_chart(const BubbleRun& b, double x_max) {
    Chart c{.title = b.schedule + fmt(": %.0f stages, %.0f micro-batches, bubble %.3f measured, %.3f by the formula",
                                      b.P, b.m, b.measured, (b.P - 1.0) / (b.m + b.P - 1.0)),
            .x = {.label = "time in the step (ms): each slot's own time, laid out as on " + std::to_string(b.P) +
                           " devices", .min = 0, .max = x_max},
            .y = {.label = "stage", .min = -0.5, .max = b.P - 0.5}, .height = 90 + 70 * b.P};
    for (int s = 0; s < b.P; s++) c.y.ticks.push_back(s);
    const CsvTable& t = b.timeline;
    for (size_t i = 0; i < t.rows.size(); i++) {
        bool back = t.text(i, "pass") == "backward";
        double y = t.num(i, "stage");
        c.boxes.push_back({.x0 = t.num(i, "start_ms"), .x1 = t.num(i, "end_ms"), .y0 = y - 0.38, .y1 = y + 0.38,
                           .color = back ? Rgb{244, 170, 110} : Rgb{140, 190, 235},
                           .label = (back ? "B" : "F") + t.text(i, "micro"), .key = back ? "backward" : "forward"});
    }
    c.legend_outside = true;
    return c;
}

inline void write_pipeline_figures(const PipelineSettings& s, const std::string& dir, Report& rep,
                                   const std::function<void(const std::string&)>& progress) {
    const std::string tokens = dir + "/runs/pipeline_tokens.bin";
    write_pipeline_tokens(tokens, 64, 200000);
    // the timelines: 4 stages, 8 micro-batches, both schedules
    std::vector<BubbleRun> shown;
    for (const char* sched : {"1f1b", "gpipe"}) {
        shown.push_back(run_pipeline(s, dir, tokens, 4, 8, sched));
        progress("pipeline: timeline of " + std::string(sched) +
                 (shown.back().ran ? "" : " not run (" + shown.back().why + ")"));
    }
    // the sweep: bubble vs m for P = 2, 4, 8 (1F1B)
    std::vector<BubbleRun> sweep;
    for (int P : {2, 4, 8})
        for (int m : {1, 2, 4, 8, 16}) {
            sweep.push_back(P == 4 && m == 8 ? shown[0] : run_pipeline(s, dir, tokens, P, m, "1f1b"));
            progress("pipeline: P " + std::to_string(P) + ", m " + std::to_string(m) + ": " +
                     (sweep.back().ran ? fmt("bubble %.3f measured, %.3f by the formula", sweep.back().measured,
                                             (P - 1.0) / (m + P - 1.0))
                                       : "not run (" + sweep.back().why + ")"));
        }

    rep.heading("Pipeline parallelism: the bubble");
    rep.para("Boxes are a step's slots, F i and B i the forward and backward of micro-batch i. A " + s.model + " GPT-2 on a synthetic token shard, `--pp P --ranks P -b " + std::to_string(s.micro_batch) +
             " -t " + std::to_string(s.seq_len) + "`, m micro-batches per step (`-d`), " + std::to_string(s.steps) +
             " steps (the first not timed): every stage holds as many layers, and the vocabulary is too small for "
             "the LM head to weigh, so the stages are equal and the formula's assumption holds. *Measured* is each "
             "slot's own time (the rank thread's CPU time on the CPU build) laid out by the schedule as if every "
             "stage had its own device; the wall clock of emulated ranks sharing fewer cores than ranks is not a "
             "pipeline's (a waiting rank frees its core for a busy one), so it is listed apart.");
    bool drew = true;
    if (shown[0].ran && shown[1].ran) {
        double x_max = 0;
        for (const BubbleRun& r : shown)
            for (size_t i = 0; i < r.timeline.rows.size(); i++) x_max = std::max(x_max, r.timeline.num(i, "end_ms"));
        drew = write_png(dir + "/pipeline_timeline.png",
                         tile_images({render_chart(timeline_chart(shown[0], x_max)), render_chart(timeline_chart(shown[1], x_max))},
                                     1, "one step, slot by slot"));
        // both runs' rows (the trainer's columns, write_bubble_csv), each after its schedule's name
        CsvWriter tl(dir + "/pipeline_timeline.csv", {"schedule", "stage", "slot", "micro", "pass", "busy_ms",
                                                      "start_ms", "end_ms", "wall_start_ms", "wall_end_ms"});
        for (const BubbleRun& r : shown)
            for (std::vector<std::string> row : r.timeline.rows) {
                row.insert(row.begin(), r.schedule);
                tl.row(row);
            }
        tl.save();
        if (drew) rep.image("pipeline_timeline.png", "1F1B and GPipe timelines");
    }
    CsvWriter csv(dir + "/pipeline_bubble.csv", {"stages", "micro_batches", "schedule", "formula", "measured",
                                                 "wall_clock", "status"});
    Chart c{.title = "pipeline bubble (1F1B): dots measured, lines (P-1)/(m+P-1)",
            .x = {.label = "micro-batches per step m", .log = true, .ticks = {1, 2, 4, 8, 16, 32}},
            .y = {.label = "bubble: idle share of each stage's step"}};
    std::vector<std::vector<std::string>> rows;
    int k = 0;
    for (int P : {2, 4, 8}) {
        LineSeries formula{.label = "P = " + std::to_string(P), .color = plot_color(k), .dashed = true, .markers = false};
        for (double m = 1; m <= 32; m *= 1.25) formula.x.push_back(m), formula.y.push_back((P - 1) / (m + P - 1));
        LineSeries measured{.color = plot_color(k), .line = false};
        for (const BubbleRun& r : sweep) {
            if (r.P != P) continue;
            double f = (P - 1.0) / (r.m + P - 1.0);
            csv.row({std::to_string(P), std::to_string(r.m), r.schedule, csv_num(f), r.ran ? csv_num(r.measured) : "nan",
                     r.ran ? csv_num(r.wall) : "nan", r.ran ? "measured" : csv_field(r.why)});
            rows.push_back({std::to_string(P), std::to_string(r.m), fmt("%.3f", f), r.ran ? fmt("%.3f", r.measured) : "-",
                            r.ran ? fmt("%.3f", r.wall) : "-"});
            if (r.ran) measured.x.push_back(r.m), measured.y.push_back(r.measured);
        }
        c.lines.push_back(formula);
        c.lines.push_back(measured);
        k++;
    }
    csv.save();
    if (write_png(dir + "/pipeline_bubble.png", render_chart(c)) && drew)
        rep.image("pipeline_bubble.png", "bubble vs micro-batches");
    rep.table({"P", "m", "(P-1)/(m+P-1)", "measured", "wall clock here"}, rows);
}
