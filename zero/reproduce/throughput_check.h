// The step-time model checked against this machine: for a grid of trainer runs
// (stages 0-3, emulated N 1-8, tensor and sequence parallelism, pipeline
// stages, CPU and NVMe offload, recomputation, micro-steps, several B and T), the run's operations are
// first timed alone into a measured profile (--calibrate PROFILE, which never
// looks at a step's time), then the step is predicted from it (--predict) and
// measured (the median of the steps after two warm-up steps), and the two are
// set side by side with the error. The profiles of all runs together are left
// in OUT/measured_profile.json (zero/perf/profiles/cpu.json is one such).
//   throughput_check.csv/png, the "checked against measurement" section
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "zero/base/csv.h"
#include "zero/base/plot.h"
#include "zero/perf/profile.h"
#include "zero/reproduce/report.h"
#include "zero/reproduce/run_command.h"

struct CheckSettings {
    std::string trainer, profile;  // the profile the runs calibrate into (made afresh)
    std::string flags;             // the data, say
    int steps = 8;                 // two warm up; the median of the rest is the measurement
    std::vector<std::string> runs;
};

// The runs checked on the CPU build: a small GPT-2 (make train's shape) in
// every arrangement, and GPT-2 124M.
inline std::vector<std::string> cpu_check_runs() {
    const std::string s = "-e L=4,H=4,C=128,V=50257,T=256 -p fp32 ";
    return {
        s + "-b 8 -t 64 -z 1",
        s + "-b 16 -t 64 -z 1",
        s + "-b 2 -t 256 -z 1",
        s + "-b 8 -t 64 -z 0 -r 1",
        s + "-b 8 -t 64 -z 1 -r 2",
        s + "-b 4 -t 64 -z 1 -d 1024",
        s + "-b 8 -t 64 --ranks 2 -z 0",
        s + "-b 8 -t 64 --ranks 2 -z 1",
        s + "-b 8 -t 64 --ranks 2 -z 2",
        s + "-b 8 -t 64 --ranks 2 -z 3",
        s + "-b 4 -t 64 --ranks 4 -z 3",
        s + "-b 2 -t 64 --ranks 8 -z 3",
        s + "-b 8 -t 64 --ranks 2 --tp 2 -z 1",
        s + "-b 8 -t 64 --ranks 4 --tp 2 --sp 1 -z 2",
        s + "-b 4 -t 64 --ranks 2 -z 2 --offload_optimizer cpu -d 1024",
        s + "-b 8 -t 64 --ranks 2 -z 3 --offload_optimizer cpu --offload_param cpu -r 2 --offload_activations 1",
        s + "-b 2 -t 64 --ranks 2 -z 2 --offload_optimizer nvme --nvme_path {scratch}",
        s + "-b 8 -t 64 --ranks 2 --pp 2 -z 1 -d 2048",
        s + "-b 8 -t 64 --ranks 4 --pp 4 -z 1 -d 2048 --pp_schedule gpipe",
        s + "-b 4 -t 64 --ranks 8 --pp 2 --tp 2 -z 2 -d 1024",
        "-e d12 -p fp32 -b 1 -t 64 -z 1",
        "-e d12 -p fp32 -b 2 -t 64 --ranks 2 -z 2",
    };
}

// The runs checked on one GPU (dev/bench_gpu.sh throughput): GPT-2 124M to 1.5B, every stage, emulated
// ranks, tensor parallelism, offload, bf16 at T 1024.
inline std::vector<std::string> gpu_check_runs() {
    const std::string s = "-p bf16 -t 1024 ";
    return {
        // sizes and arrangements interleaved, so that a call cut short by its
        // time limit has still checked a spread of them (the profile is saved after each run)
        s + "-e d12 -b 16 -z 1",
        s + "-e d48 -b 4 -z 2",
        s + "-e d24 -b 8 -z 1",
        s + "-e d12 -b 8 --ranks 2 -z 2",
        s + "-e d36 -b 4 -z 3 -r 2",
        s + "-e d12 -b 4 --ranks 4 -z 3",
        s + "-e d12 -b 16 -z 2 --offload_optimizer cpu",
        s + "-e d12 -b 8 --ranks 4 --tp 2 -z 1",
        s + "-e d12 -b 2 --ranks 8 -z 1",
        s + "-e d12 -b 16 -z 0",
        s + "-e d12 -b 16 -z 3",
        s + "-e d12 -b 16 -z 2",
        s + "-e d48 -b 4 -z 2 --offload_optimizer cpu --offload_grad_accum device -d 65536",
        s + "-e d24 -b 8 -z 2 --offload_optimizer nvme --nvme_path {scratch}",
    };
}

struct CheckPoint {
    std::string flags, why;  // why: it did not run, or its times are a busy machine's, not the model's error
    std::string note;        // measured again, and why
    double predicted = NAN, measured = NAN;
    double others = 0;       // the machine's share other jobs took while it calibrated and ran
    double error() const { return predicted / measured - 1; }
};

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? NAN : v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

// "step 0.1234 s" from --predict's output; the step lines' milliseconds from a run.
inline double predicted_seconds(const std::string& out) {
    std::string l = line_with(out, "  step ");
    return l.empty() ? NAN : atof(l.c_str() + l.find("step ") + 5);
}
inline double measured_seconds(const std::string& out, int warmup) {
    std::vector<double> ms;
    size_t pos = 0;
    while ((pos = out.find("\nstep ", pos)) != std::string::npos) {
        pos++;
        std::string line = out.substr(pos, out.find('\n', pos) - pos);
        size_t bar = 0;
        for (int k = 0; k < 4 && bar != std::string::npos; k++) bar = line.find('|', bar + 1);
        if (bar != std::string::npos && line.find(" ms") != std::string::npos) ms.push_back(atof(line.c_str() + bar + 1));
    }
    if ((int)ms.size() <= warmup) return NAN;
    return median(std::vector<double>(ms.begin() + warmup, ms.end())) / 1000.0;
}

// One run checked: its operations calibrated, its steps measured, its step predicted ("{scratch}" in its
// flags: a directory of the check's, for NVMe offload's files). Every calibration goes into `all` too.
inline CheckPoint check_run(const CheckSettings& s, const std::string& flags, const std::string& dir,
                            const std::string& log, Profile& all) {
    CheckPoint p{.flags = flags};
    std::string run_flags = flags;
    if (size_t at = run_flags.find("{scratch}"); at != std::string::npos) {
        run_logged("mkdir -p '" + dir + "/scratch'", "/dev/null");
        run_flags.replace(at, 9, dir + "/scratch");
    }
    // each run its own profile, timed afresh: one disturbed measurement spoils one run, not every run after
    const std::string base = s.trainer + " " + run_flags + " " + s.flags, profile = log + "_profile.json";
    run_logged("rm -f '" + profile + "'", "/dev/null");
    CommandRun cal = run_logged(base + " --calibrate " + profile, log + "_calibrate.log");
    CommandRun run = run_logged(base + " -x " + std::to_string(s.steps) + " -v 0 -s 0 -n -1", log + ".log");
    CommandRun pred = run_logged(base + " --predict " + profile, log + "_predict.log");
    p.others = std::max(cal.others, run.others);
    if (cal.status == 0) {
        Profile one = load_profile(profile);
        for (const auto& c : one.kernels) all.kernels[c.first].insert(c.second.begin(), c.second.end());
        for (const auto& c : one.collectives) all.collectives[c.first].insert(c.second.begin(), c.second.end());
        if (all.device.empty()) all = Profile(one), all.path.clear();
        save_profile(all, s.profile);  // after every run: a check stopped part-way keeps what it measured
    }
    if (cal.status || run.status || pred.status) {
        std::string err = line_with(cal.output + run.output + pred.output, "error:");
        p.why = err.empty() ? "failed" : err;
    } else {
        p.predicted = predicted_seconds(pred.output), p.measured = measured_seconds(run.output, 2);
    }
    return p;
}

// The targets (the report's): a median error within 5%, the worst within 15%. A run timed while other jobs kept
// more than 5% of the machine busy, or whose error is beyond 15%, is checked again, calibration and all: a
// quiet second time is the run's result if the first was busy or the two agree within 5%; else neither is the
// model's error, and the report says the machine was busy instead.
inline std::vector<CheckPoint> check_throughput(const CheckSettings& s, const std::string& dir,
                                                const std::function<void(const std::string&)>& progress) {
    const double MEDIAN_TARGET = 0.05, MAX_TARGET = 0.15;
    std::vector<CheckPoint> pts;
    run_logged("rm -f '" + s.profile + "'", "/dev/null");
    HostClock clock;
    int k = 0, total = (int)s.runs.size();
    Profile all;  // every run's measurements: the profile the check leaves behind
    for (const std::string& flags : s.runs) {
        const std::string log = dir + "/runs/check" + std::to_string(k);
        CheckPoint p = check_run(s, flags, dir, log, all);
        if (p.why.empty() && (p.others > MEDIAN_TARGET || std::fabs(p.error()) > MAX_TARGET)) {
            CheckPoint again = check_run(s, flags, dir, log + "_again", all);
            const std::string both = fmt("%+.1f%% then %+.1f%%, other jobs keeping %.0f%% and %.0f%% of the cores busy",
                                         100 * p.error(), 100 * again.error(), 100 * p.others, 100 * again.others);
            if (again.why.empty() && again.others <= MEDIAN_TARGET &&
                (p.others > MEDIAN_TARGET || std::fabs(again.error() - p.error()) <= MEDIAN_TARGET))
                again.note = "measured twice: " + both, p = again;
            else
                p.why = "a busy machine, not the model: " + both;
        }
        pts.push_back(p);
        const std::string said = p.why.empty() ? p.note : p.why;
        progress(progress_line(++k, total, clock.seconds(),
                               "throughput check: " + flags + fmt(": predicted %.4f s, measured %.4f s (%+.1f%%)",
                                                                  p.predicted, p.measured, 100 * p.error()) +
                                   (said.empty() ? "" : "; " + said)));
    }
    return pts;
}

inline void write_throughput_check(const CheckSettings& s, const std::vector<CheckPoint>& pts, const std::string& dir,
                                   const std::string& device, Report& rep) {
    CsvWriter csv(dir + "/throughput_check.csv", {"flags", "predicted_s", "measured_s", "error", "status"});
    std::vector<double> errs;
    int busy = 0;  // runs whose times a busy machine spoilt
    std::vector<std::vector<std::string>> rows;
    LineSeries pts_line{.label = "runs", .color = plot_color(0), .line = false, .marker_radius = 5};
    for (const CheckPoint& p : pts) {
        const bool ran = std::isfinite(p.predicted) && std::isfinite(p.measured), ok = ran && p.why.empty();
        const std::string note = p.note.empty() ? "" : "; " + p.note;
        csv.row({csv_field(p.flags), csv_num(p.predicted, "%.6g"), csv_num(p.measured, "%.6g"),
                 ran ? csv_num(p.error(), "%.4f") : "nan", csv_field(ok ? "measured" + note : p.why)});
        if (!ran) rows.push_back({"`" + p.flags + "`", "", "", "not run: " + p.why});
        if (!ok) busy += ran;
        if (!ran) continue;
        if (ok) errs.push_back(std::fabs(p.error())), pts_line.x.push_back(p.measured), pts_line.y.push_back(p.predicted);
        rows.push_back({"`" + p.flags + "`", fmt("%.4f", p.predicted), fmt("%.4f", p.measured),
                        ok ? fmt("%+.1f%%", 100 * p.error()) + note : p.why});
    }
    csv.save();
    const double median_error = median(errs);
    const double worst = errs.empty() ? NAN : *std::max_element(errs.begin(), errs.end());
    Chart c{.title = "step time: predicted against measured (" + device + ")",
            .x = {.label = "measured step (s)", .log = true}, .y = {.label = "predicted step (s)", .log = true}};
    double lo = 1e9, hi = 0;
    for (double v : pts_line.x) lo = std::min(lo, v), hi = std::max(hi, v);
    for (double f : {1.0, 1.15, 0.85})  // predicted = measured, and +-15%
        c.lines.push_back({.label = f == 1 ? "predicted = measured" : f > 1 ? "+-15%" : "", .x = {lo / 1.2, hi * 1.2},
                           .y = {lo / 1.2 * f, hi * 1.2 * f}, .color = f == 1 ? PLOT_INK : plot_color(7), .dashed = true,
                           .markers = false});
    c.lines.push_back(pts_line);
    write_png(dir + "/throughput_check.png", render_chart(c));
    rep.heading("The step-time model checked against measured runs");
    rep.image("throughput_check.png", "predicted vs measured step time");
    rep.para(fmt("%.0f", (double)rows.size()) + " runs of the " + device + " build. Each run's operations were timed "
             "alone first (`--calibrate`; all the runs' times together: `" + s.profile + "`): every kernel, copy, transfer and host operation "
             "at its shape while as many ranks ran it as share the device, every emulated collective in a world "
             "of the run's size, with NVMe offload the disk read and written with the run's requests, as many at once "
             "as its ranks keep in flight; then its step predicted from those times (`--predict`) and measured (the median "
             "of " + std::to_string(s.steps - 2) + " steps after 2 warm-up steps); each run into a profile of its own, "
             "so one disturbed measurement spoils one run only. The calibration never sees a "
             "step's time, and no constant is fitted to one. A run beyond the worst target, or timed while other jobs "
             "kept more than 5% of the machine's cores busy (`/proc/stat`), was checked again: a quiet second time "
             "counts if the first was busy or the two agree within 5%; else the machine, not the model, is named. " +
             (errs.empty() ? std::string("**No run was timed on a quiet machine**") : "**Median |error| " +
              fmt("%.1f%%, max %.1f%%** over %.0f runs", 100 * median_error, 100 * worst, (double)errs.size())) +
             " (targets 5% and 15%)" + (busy ? fmt("; %.0f left out, timed on a busy machine", busy) : "") +
             ". Numbers: `throughput_check.csv`.");
    rep.table({"run", "predicted s", "measured s", "error"}, rows);
}
