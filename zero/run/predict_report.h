// --predict PROFILE: the step-time model's answer for the run the flags
// describe, without running it. On a measured profile (what --calibrate
// wrote) the ranks are this build's emulated ones (--ranks); on a cluster
// profile each rank has a device, --nodes nodes of them, tensor groups of
// adjacent ranks inside a node as far as they fit. Where the run does not fit
// the profile's device, the configurations that would (zero/run/fit_check.h)
// are ranked by predicted speed.
#pragma once

#include <algorithm>
#include <cstdio>

#include "zero/perf/simulate.h"
#include "zero/run/fit_check.h"
#include "zero/run/run_setup.h"

// On a cluster profile the world is --nodes nodes of its devices: set before
// make_run_setup, which checks the grid and derives the micro-steps from it.
inline void prepare_prediction(TrainOptions& o) {
    Profile p = load_profile(o.predict);
    if (p.measured) return;
    CHECK(o.nodes >= 1, "--nodes must be at least 1 (got %d)", o.nodes);
    CHECK(o.ranks == 1, "--ranks emulates ranks in this process; on a cluster profile the world is --nodes x %d",
          p.devices_per_node);
    o.ranks = o.nodes * p.devices_per_node;
}

inline void print_step_prediction(const StepPrediction& s, const MemoryQuery& q, FILE* out) {
    fprintf(out, "  step %.4g s, %.0f tokens/s, %.2f TFLOP/s per device (the matmuls' and attention's FLOPs, "
                 "recomputation included)\n", s.step_s, s.tokens_per_s, s.tflops_per_device);
    fprintf(out, "  the kernels alone: %.4g s; what the rest adds:", s.compute_only_s);
    for (const auto& e : s.exposed) fprintf(out, " %s %.3g s;", e.first.c_str(), e.second);
    fprintf(out, "\n");
    if (q.pp() > 1)
        fprintf(out, "  pipeline bubble %.3f of the stages' time (%s, %d stages, %d micro-batches; (P-1)/(m+P-1) = %.3f)\n",
                s.bubble, q.gpipe ? "gpipe" : "1f1b", q.pp(), q.micro_steps, pipeline_bubble_formula(q.pp(), q.micro_steps));
    if (s.interpolated > 0)
        fprintf(out, "  %d of the %d operations per step were not measured at their shape: interpolated "
                     "(zero/perf/op_time.h)\n", s.interpolated, s.ops);
}

inline void print_prediction(const TrainOptions& o, const RunSetup& run, FILE* out) {
    const double GiB = 1073741824.0;
    Profile p = load_profile(o.predict);
    Placement pl;
    pl.emulated = p.measured, pl.world = run.world;
    MemoryQuery q = run.memory_query(o);
    fprintf(out, "predicted on %s (%s; %s): %d rank(s) = %d data-parallel x %d tensor-parallel%s, B %d, T %d, "
                 "%d micro-step(s), stage %d\n", o.predict.c_str(), p.device.c_str(),
            p.measured ? "measured here, emulated ranks sharing it"
                       : ("from specifications, kernel efficiencies of " + p.efficiency_from).c_str(),
            pl.world, q.world, q.tp, p.measured ? "" : (", " + std::to_string(o.nodes) + " node(s)").c_str(),
            q.micro_batch, q.seq_len, q.micro_steps, q.stage);
    double dev, host;
    rank_need(q, dev, host);
    bool fits = p.measured || p.memory_gib <= 0 || dev <= p.memory_gib * GiB;
    if (!p.measured)
        fprintf(out, "  memory per rank: %.2f GiB of the device's %.0f GiB: %s\n", dev / GiB, p.memory_gib,
                fits ? "fits" : "does NOT fit");
    if (fits) print_step_prediction(predict_step(q, p, pl), q, out);
    if (fits) return;
    std::vector<FitOption> options =
        fitting_options(q, [&](const MemoryQuery& a) { double d, h; rank_need(a, d, h); return d <= p.memory_gib * GiB; });
    for (FitOption& f : options) f.seconds = predict_step(f.q, p, pl).step_s;
    std::stable_sort(options.begin(), options.end(), [](const FitOption& a, const FitOption& b) {
        return a.seconds < b.seconds;
    });
    fprintf(out, "  these would fit, fastest first (predicted):\n");
    for (size_t i = 0; i < options.size() && i < (size_t)FIT_OPTIONS_SHOWN; i++)
        fprintf(out, "    %-62s %10.0f tokens/s, device %.2f GiB\n", options[i].flags.c_str(),
                (double)q.micro_batch * q.seq_len * q.world * q.micro_steps / options[i].seconds, options[i].dev / GiB);
    if (options.empty()) fprintf(out, "    (none)\n");
}
