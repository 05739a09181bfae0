// Measured per-rank memory and traffic vs the number of ranks N: one trainer
// run per (stage, N) with --mem_report, rank 0's live bytes after forward,
// backward and step and its peak (the accountant), the predictor's numbers
// (from the same run's report), the paper's model-state formula, and the bytes
// each collective sent against 2Psi(N-1)/N and 3Psi(N-1)/N.
//   memory_vs_n.csv/png, comm_vs_n.csv/png
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/comm/comm.h"
#include "zero/engine/memory_predictor.h"
#include "zero/layout/gpt2_config.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"
#include "zero/reproduce/report.h"
#include "zero/reproduce/run_command.h"

struct MeasureSettings {
    std::string trainer;
    std::string model = "d12";
    std::string precision = "fp32";
    int micro_batch = 1, seq_len = 64;
    std::vector<int> ranks = {1, 2, 4, 8};
    std::string flags;  // extra trainer flags (the data, say)
};

static const char* const PHASES[4] = {"forward", "backward", "step", "peak"};

struct MeasuredPoint {
    int stage = 0, N = 1;
    bool ran = false;
    std::string why;          // why not, when it did not run
    double measured[4] = {};  // live after forward, backward, step; peak
    double predicted[4] = {}; // the predictor's live bytes; for the peak, its reserved bytes (an upper bound)
    double paper = 0;         // the paper's model states, (s + s + K) Psi with this run's s, per stage
    double sent[NUM_COMM_OPS] = {};
    double sent_total = 0, formula = 0;  // bulk bytes sent per rank per step; 2 or 3 Psi (N-1)/N s
};

inline double dtype_bytes_of(const std::string& precision) { return precision == "fp32" ? 4 : 2; }

// The run's own numbers: rank 0's device rows of step 1 and its collectives.
inline void read_reports(const std::string& dir, MeasuredPoint& p) {
    CsvTable mem = read_csv_table(dir + "/mem_report_rank0.csv");
    for (size_t i = 0; i < mem.rows.size(); i++) {
        if (mem.text(i, "arena") != "device" || mem.num(i, "step") != 1) continue;
        for (int ph = 0; ph < 3; ph++)
            if (mem.text(i, "phase") == PHASES[ph]) {
                p.measured[ph] = mem.num(i, "live_total");
                p.predicted[ph] = mem.num(i, "predicted_total");
                p.measured[3] = mem.num(i, "peak");
            }
    }
    CsvTable comm = read_csv_table(dir + "/comm_report_rank0.csv");
    for (size_t i = 0; i < comm.rows.size(); i++) {
        if (comm.num(i, "step") != 1) continue;
        for (int op = 0; op < NUM_COMM_OPS; op++)
            if (comm.text(i, "op") == comm_op_name((CommOp)op)) p.sent[op] = comm.num(i, "bytes_sent");
    }
    for (int op = 0; op < NUM_COMM_OPS; op++)
        if ((CommOp)op != CommOp::Scalar) p.sent_total += p.sent[op];
}

inline std::vector<MeasuredPoint> measure_memory_and_traffic(const MeasureSettings& s, const std::string& dir,
                                                             const std::function<void(const std::string&)>& progress) {
    GPT2Config cfg = gpt2_config_from_descriptor(s.model);
    ParamLayout layout(cfg);
    const double bytes = dtype_bytes_of(s.precision), psi = (double)layout.num_parameters();
    std::vector<MeasuredPoint> points;
    int total = 4 * (int)s.ranks.size(), k = 0;
    HostClock clock;
    for (int z = 0; z <= 3; z++)
        for (int N : s.ranks) {
            MeasuredPoint p{.stage = z, .N = N};
            ShardPlan plan(layout.unit_specs(), N, SHARD_ALIGN);
            double psi_p = (double)plan.full_numel;  // padded: what the collectives move
            p.formula = (z < 3 ? 2 : 3) * psi_p * (N - 1) / N * bytes;
            p.paper = model_state_bytes(psi, z, N, bytes).total();
            // the predictor, for runs that do not happen (a run's report carries its own)
            const MemoryPrediction pred = predict_memory({.cfg = cfg, .stage = z, .world = N, .dtype_bytes = (size_t)bytes,
                                                          .micro_batch = s.micro_batch, .seq_len = s.seq_len},
                                                         SHARD_ALIGN);
            const MemCounts* phases[4] = {&pred.after_forward, &pred.after_backward, &pred.after_step, &pred.reserved};
            for (int ph = 0; ph < 4; ph++) p.predicted[ph] = (double)phases[ph]->total(Arena::Device);

            std::string run_dir = dir + "/runs/memory_z" + std::to_string(z) + "_n" + std::to_string(N);
            run_logged("rm -rf '" + run_dir + "'", "/dev/null");
            const std::string cmd =
                strf("%s -e %s -p %s -b %d -t %d --ranks %d -z %d -x 1 -v 0 -s 0 -n -1 --mem_report 1 -o %s %s",
                     s.trainer.c_str(), s.model.c_str(), s.precision.c_str(), s.micro_batch, s.seq_len, N, z,
                     run_dir.c_str(), s.flags.c_str());
            CommandRun r = run_logged(cmd, run_dir + ".log");
            p.ran = r.status == 0;
            if (p.ran) read_reports(run_dir, p);
            else p.why = failure_reason(r);
            const std::string what = fmt("memory and traffic: stage %.0f, %.0f rank(s): ", z, N);
            progress(progress_line(++k, total, clock.seconds(),
                                   what + (p.ran ? fmt("%.1f s", r.seconds) : "not run (" + p.why + ")")));
            points.push_back(p);
        }
    return points;
}

inline void write_memory_figures(const MeasureSettings& s, const std::vector<MeasuredPoint>& pts,
                                 const std::string& dir, Report& rep) {
    const double MiB = 1048576.0;
    CsvWriter csv(dir + "/memory_vs_n.csv", {"stage", "ranks", "phase", "measured_bytes", "predicted_bytes",
                                             "predicted_is", "paper_model_states_bytes", "status"});
    for (const MeasuredPoint& p : pts)
        for (int ph = 0; ph < 4; ph++)
            csv.row({std::to_string(p.stage), std::to_string(p.N), PHASES[ph],
                     p.ran ? csv_num(p.measured[ph], "%.0f") : "nan", csv_num(p.predicted[ph], "%.0f"),
                     ph == 3 ? "reserved" : "live", csv_num(p.paper, "%.0f"), p.ran ? "measured" : csv_field(p.why)});
    csv.save();
    CsvWriter ccsv(dir + "/comm_vs_n.csv", {"stage", "ranks", "all_reduce_bytes", "reduce_scatter_bytes",
                                            "all_gather_bytes", "total_sent_bytes", "formula_bytes", "status"});
    for (const MeasuredPoint& p : pts) {
        auto sent = [&](double bytes) { return p.ran ? csv_num(bytes, "%.0f") : std::string("nan"); };
        ccsv.row({std::to_string(p.stage), std::to_string(p.N), sent(p.sent[(int)CommOp::AllReduce]),
                  sent(p.sent[(int)CommOp::ReduceScatter]), sent(p.sent[(int)CommOp::AllGather]), sent(p.sent_total),
                  csv_num(p.formula, "%.0f"), p.ran ? "measured" : csv_field(p.why)});
    }
    ccsv.save();

    // a chart over the runs' N, its legend beside it
    auto ranks_chart = [&](const std::string& title, const char* ylabel, int height) {
        return Chart{.title = title, .x = {.label = "ranks N", .log = true, .ticks = {s.ranks.begin(), s.ranks.end()}},
                     .y = {.label = ylabel}, .width = 1000, .height = height, .legend_outside = true};
    };
    // memory: one panel per stage; colour = phase; markers measured, dashed predicted, black the paper
    std::vector<Image> panels;
    const char* phase_labels[4] = {"after forward", "after backward", "after step", "peak"};
    for (int z = 0; z <= 3; z++) {
        Chart c = ranks_chart("stage " + std::to_string(z), "rank 0's memory (MiB)", 480);
        for (int ph = 0; ph < 4; ph++) {
            LineSeries m{.label = std::string(phase_labels[ph]) + ": measured", .color = plot_color(ph), .line = false,
                         .marker_radius = 6};
            LineSeries pr{.color = plot_color(ph), .dashed = true, .markers = false};
            for (const MeasuredPoint& p : pts) {
                if (p.stage != z) continue;
                if (p.ran) m.x.push_back(p.N), m.y.push_back(p.measured[ph] / MiB);
                pr.x.push_back(p.N), pr.y.push_back(p.predicted[ph] / MiB);
            }
            c.lines.push_back(pr);
            c.lines.push_back(m);
        }
        LineSeries paper{.label = "paper: model states (s+s+K)Psi", .color = PLOT_INK, .markers = false};
        for (const MeasuredPoint& p : pts)
            if (p.stage == z) paper.x.push_back(p.N), paper.y.push_back(p.paper / MiB);
        c.lines.push_back(paper);
        c.lines.push_back(
            {.label = "dashed: predictor (peak: reserved)", .color = plot_color(7), .dashed = true, .markers = false});
        panels.push_back(render_chart(c));
    }
    write_png(dir + "/memory_vs_n.png",
              tile_images(panels, 2, "Per-rank memory vs N: " + s.model + ", " + s.precision + ", B " +
                                         std::to_string(s.micro_batch) + ", T " + std::to_string(s.seq_len)));

    // traffic: bytes sent per rank per step vs N, and the split by collective at the largest N
    Chart t = ranks_chart("bytes sent per rank per step", "sent per step (MiB)", 560);
    for (int k = 0; k < 2; k++) {  // the formulas first, so the measured points sit on top
        LineSeries f{.label = k == 0 ? "2 Psi (N-1)/N s (stages 0-2)" : "3 Psi (N-1)/N s (stage 3)", .color = PLOT_INK,
                     .dashed = k == 0, .markers = false};
        if (k == 1) f.color = plot_color(7);
        for (const MeasuredPoint& p : pts)
            if (p.stage == (k == 0 ? 0 : 3)) f.x.push_back(p.N), f.y.push_back(p.formula / MiB);
        t.lines.push_back(f);
    }
    for (int z = 0; z <= 3; z++) {  // stages 0-2 coincide: shrinking markers keep each visible
        LineSeries m{.label = "stage " + std::to_string(z) + ": measured", .color = plot_color(z), .line = false,
                     .marker_radius = 10 - 2 * z};
        for (const MeasuredPoint& p : pts)
            if (p.stage == z && p.ran) m.x.push_back(p.N), m.y.push_back(p.sent_total / MiB);
        t.lines.push_back(m);
    }
    int nmax = s.ranks.empty() ? 1 : s.ranks.back();
    Chart b{.title = "by collective, N = " + std::to_string(nmax), .y = {.label = "sent per step (MiB)"}, .width = 700,
            .height = 560, .stacked = true};
    const CommOp ops[3] = {CommOp::AllReduce, CommOp::ReduceScatter, CommOp::AllGather};
    for (int k = 0; k < 3; k++) b.bars.push_back({comm_op_name(ops[k]), {}, plot_color(4 + k)});
    for (int z = 0; z <= 3; z++) {
        b.categories.push_back("stage " + std::to_string(z));
        for (int k = 0; k < 3; k++) {
            double v = 0;
            for (const MeasuredPoint& p : pts)
                if (p.stage == z && p.N == nmax && p.ran) v = p.sent[(int)ops[k]] / MiB;
            b.bars[k].values.push_back(v);
        }
    }
    write_png(dir + "/comm_vs_n.png",
              tile_images({render_chart(t), render_chart(b)}, 2, "Communication per rank per step: " + s.model));

    // the report
    int ran = 0, exact = 0, comm_exact = 0;
    for (const MeasuredPoint& p : pts) {
        if (!p.ran) continue;
        ran++;
        exact += p.measured[0] == p.predicted[0] && p.measured[1] == p.predicted[1] && p.measured[2] == p.predicted[2];
        comm_exact += p.sent_total == p.formula;
    }
    rep.heading("Measured memory per rank vs N");
    rep.image("memory_vs_n.png", "memory vs N");
    rep.para(fmt("%.0f", (double)ran) + " of " + std::to_string(pts.size()) + " runs (" + s.model + ", " +
             s.precision + ", B " + std::to_string(s.micro_batch) + ", T " + std::to_string(s.seq_len) +
             ", one step each, emulated ranks). Markers: rank 0's live bytes measured by the accountant; dashed: "
             "the predictor (`zero/engine/memory_predictor.h`), for the peak its reserved bytes, which bound it; "
             "black: the paper's model states (s + s + K) Psi with s = " + fmt("%.0f", dtype_bytes_of(s.precision)) +
             " bytes, K = 12, Psi unpadded. Measured equals predicted to the byte in " + std::to_string(exact) +
             " of " + std::to_string(ran) + " runs. How it differs from the paper's line: after backward, when parameters, "
             "gradients and optimizer states are all live, the measurement is the paper's model states at stages 0-1, "
             "plus at stages 2-3 the gradient (and at stage 3 parameter) units in flight; after forward no gradients "
             "are live yet but the activations are; after the step the gradients are freed (the paper counts them "
             "always). Runs the machine cannot hold are refused by the trainer's fit check and drawn by their "
             "prediction alone. Numbers: `memory_vs_n.csv`.");
    std::vector<std::vector<std::string>> rows;
    for (const MeasuredPoint& p : pts) {
        if (!p.ran)
            rows.push_back({std::to_string(p.stage), std::to_string(p.N), "not run: " + p.why, "", "", "", "", ""});
        else
            rows.push_back({std::to_string(p.stage), std::to_string(p.N), fmt("%.2f", p.measured[0] / MiB),
                            fmt("%.2f", p.measured[1] / MiB), fmt("%.2f", p.measured[2] / MiB),
                            fmt("%.2f", p.measured[3] / MiB), fmt("%.2f", p.paper / MiB),
                            fmt("%.2f", p.sent_total / MiB)});
    }
    rep.table({"stage", "N", "after fwd MiB", "after bwd MiB", "after step MiB", "peak MiB", "paper MiB",
               "sent MiB/step"},
              rows);
    rep.heading("Measured communication vs N");
    rep.image("comm_vs_n.png", "communication vs N");
    rep.para("Bytes each rank sent per step, counted by the backend, against the paper's volumes: "
             "2 Psi (N-1)/N elements for stages 0-2 (an all-reduce is a reduce-scatter plus an all-gather) and "
             "3 Psi (N-1)/N for stage 3 (parameters all-gathered before forward and again before backward), "
             "times s bytes, Psi padded to the plan's slices. Equal to the byte in " + std::to_string(comm_exact) +
             " of " + std::to_string(ran) + " runs. Right: the same bytes split by collective at the largest N: "
             "stage 0 all-reduces, stages 1-2 reduce-scatter gradients and all-gather parameters, stage 3 "
             "all-gathers twice. Numbers: `comm_vs_n.csv`.");
}
