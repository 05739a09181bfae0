// --dry_run 1 and --predict PROFILE: the run the flags describe, without
// running it. A dry run (zero/run/dry_run.h) of the rank that stands for each
// pipeline stage gives its memory by phase, exact, beside the memory
// predictor's closed forms (which must agree); with a profile, the step-time
// model lays its operations out in time. On a measured profile (what
// --calibrate wrote) the ranks are this build's emulated ones (--ranks); on a
// cluster profile each rank has a device, --nodes nodes of them, tensor groups
// of adjacent ranks inside a node as far as they fit. Where the run does not
// fit the profile's device, the configurations that would (zero/run/fit_check.h)
// are ranked by predicted speed.
#pragma once

#include <algorithm>
#include <cstdio>

#include "zero/perf/simulate.h"
#include "zero/perf/trace.h"
#include "zero/run/dry_run.h"
#include "zero/run/fit_check.h"
#include "zero/run/run_setup.h"

// On a cluster profile the world is --nodes nodes of its devices: set before
// make_run_setup, which checks the grid and derives the micro-steps from it.
inline void prepare_prediction(TrainOptions& o) {
    Profile p = load_profile(o.predict);
    if (p.measured) return;
    CHECK(o.nodes >= 1, "--nodes must be at least 1 (got %d)", o.nodes);
    CHECK(o.nodes == 1 || p.network_gbs > 0, "%s has no network between nodes (network.node_gbs): --nodes 1",
          o.predict.c_str());
    CHECK(o.ranks == 1, "--ranks emulates ranks in this process; on a cluster profile the world is --nodes x %d",
          p.devices_per_node);
    o.ranks = o.nodes * p.devices_per_node;
}

// The step-time model's schedules of a dry run, one per stage.
inline std::vector<StepSchedule> step_schedules(const std::vector<RecordedRank>& dry, const RunSetup& run) {
    std::vector<StepSchedule> out;
    for (const RecordedRank& d : dry)
        out.push_back({d.q, d.ops, (size_t)d.q.micro_batch * d.q.seq_len * run.dp * run.micro_steps});
    return out;
}

// Each stage's rank: its memory by phase and its peak, the predictor's beside (MiB).
inline void print_dry_memory(const std::vector<RecordedRank>& dry, int stages, FILE* out) {
    const double MiB = 1048576.0;
    for (const RecordedRank& d : dry) {
        MemoryPrediction pred = predict_memory(d.q, SHARD_ALIGN);
        for (int a = 0; a < NUM_ARENAS; a++) {
            const Arena arena = (Arena)a;
            if (d.reserved.total(arena) == 0) continue;
            fprintf(out, "  rank %d%s %-6s | after fwd %10.2f MiB (pred %10.2f) | after bwd %10.2f (pred %10.2f) | "
                         "after step %10.2f (pred %10.2f) | peak %10.2f | reserved %10.2f (pred %10.2f)\n",
                    d.rank, stages > 1 ? (" (stage " + std::to_string(d.stage) + ")").c_str() : "", arena_name(arena),
                    d.live.forward.total(arena) / MiB, pred.after_forward.total(arena) / MiB,
                    d.live.backward.total(arena) / MiB, pred.after_backward.total(arena) / MiB,
                    d.live.step.total(arena) / MiB, pred.after_step.total(arena) / MiB, d.peak[a] / MiB,
                    d.reserved.total(arena) / MiB, pred.reserved.total(arena) / MiB);
        }
    }
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
    for (const std::string& k : s.unmeasured)
        fprintf(out, "  no measurement of %s: timed as a device copy of its bytes there (zero/perf/op_time.h)\n",
                k.c_str());
}

// The options o with a fit check's suggested flags applied ("-z 3 -b 2 (x4
// micro-steps)"), keeping the tokens per step.
inline TrainOptions with_flags(const TrainOptions& o, const RunSetup& run, const std::string& flags) {
    TrainOptions a = o;
    a.total_batch = (long)o.micro_batch * o.seq_len * run.dp * run.micro_steps;
    std::string plain;
    for (size_t i = 0; i < flags.size(); i++) {
        if (flags[i] == '(') i = flags.find(')', i);
        else plain += flags[i];
    }
    parse_flag_string(plain, a);
    return a;
}

// --trace with --predict: the dry run's steady step (its second), each op on the lane and at the time the model placed it.
inline void write_predicted_trace(const std::string& path, const std::vector<RecordedRank>& dry, const StepPrediction& s,
                                  const std::string& profile) {
    std::vector<TracedRank> ranks;
    for (size_t k = 0; k < dry.size(); k++) {
        TracedRank t;
        t.rank = dry[k].rank, t.stage = dry[k].stage;
        t.name = "rank " + std::to_string(t.rank) + (dry.size() > 1 ? ", stage " + std::to_string(t.stage) : "") +
                 " (standing for its stage's ranks)";
        const std::vector<StepOp>& ops = dry[k].ops;
        const size_t first = std::find_if(ops.begin(), ops.end(), [](const StepOp& op) { return op.step == 1; }) -
                             ops.begin();
        t.ops = ops_from(ops, first);
        t.start.assign(s.timeline.start[k].begin() + first, s.timeline.start[k].end());
        t.end.assign(s.timeline.end[k].begin() + first, s.timeline.end[k].end());
        for (size_t i = first; i < ops.size(); i++) t.track.push_back((int)s.timeline.lane[k][i]);
        ranks.push_back(t);
    }
    write_trace(path, ranks, "predicted on " + profile + " (a dry run laid out by the step-time model)",
                lanes_in_words(s.timeline.rules), s.step_s);
}

// A run's step on a profile, from its dry run, without the breakdown (and with `trace`, its timeline written there).
inline StepPrediction predict_run(const TrainOptions& o, const RunSetup& run, const Profile& p,
                                  const std::string& trace = "") {
    const std::vector<RecordedRank> dry = dry_run(o, run);
    const StepPrediction s = predict_step(step_schedules(dry, run), run.memory_query(o), p, {p.measured, run.world}, false);
    if (!trace.empty()) write_predicted_trace(trace, dry, s, p.path);
    return s;
}

// A cluster profile with an anchor (zero/perf/profile.h): its kernels' times
// scaled by the one factor that makes the anchor run, predicted on it, take
// what was published (its rate counted as Megatron-LM counts; on the
// anchor's device, whose peak may differ from the profile's: the step is
// taken to scale with the peak). One device, so the step is the kernels'
// time times the factor plus what does not scale: two predictions solve it.
inline Profile anchored_profile(Profile p) {
    if (p.anchor_flags.empty()) return p;
    const TrainOptions o = options_from_flags(p.anchor_flags);
    const RunSetup run = make_run_setup(o);
    CHECK(run.world == 1, "%s: the anchor is a run of one device", p.path.c_str());
    const double target = megatron_flops(run.cfg, o.micro_batch, o.seq_len, o.recompute == 2) /
                          (p.anchor_tflops * 1e12) * p.anchor_peak_tflops / p.peak_tflops;
    p.compute_scale = 1;
    const double t1 = predict_run(o, run, p).step_s;
    p.compute_scale = 2;
    const double t2 = predict_run(o, run, p).step_s, kernels = t2 - t1, rest = t1 - kernels;
    CHECK(kernels > 0 && target > rest, "%s: the anchor's published step is shorter than what its kernels cannot "
          "shorten (%.3g s of %.3g s)", p.path.c_str(), rest, target);
    p.compute_scale = (target - rest) / kernels;
    return p;
}

inline void print_prediction(const TrainOptions& o, const RunSetup& run, FILE* out) {
    HostClock clock;
    std::vector<RecordedRank> dry = dry_run(o, run);
    const double dry_s = clock.seconds();
    MemoryQuery q = run.memory_query(o);
    size_t ops = 0;
    for (const RecordedRank& d : dry) ops += d.ops.size() / 2;
    fprintf(out, "dry run of %zu rank(s) standing for %d (one per pipeline stage; %zu operations a step, %.2f s): "
                 "%d rank(s) = %d data-parallel x %d tensor-parallel x %d pipeline stage(s), B %d, T %d, %d "
                 "micro-step(s), stage %d\n",
            dry.size(), run.world, ops, dry_s, run.world, run.dp, run.tp, run.pp, o.micro_batch, o.seq_len,
            run.micro_steps, o.zero_stage);
    print_dry_memory(dry, run.pp, out);
    if (o.predict.empty()) return;
    const Profile p = anchored_profile(load_profile(o.predict));
    fprintf(out, "predicted on %s (%s; %s)%s\n", o.predict.c_str(), p.device.c_str(),
            p.measured ? "measured here, emulated ranks sharing it"
                       : ("from specifications, kernel efficiencies of " + p.efficiency_from +
                          (p.matmul_curve.empty() ? "" : ", matmuls by the device's GEMM benchmark") +
                          (p.anchor_flags.empty() ? "" : ", anchored: every kernel's time x " +
                                                                  std::to_string(p.compute_scale).substr(0, 5)))
                             .c_str(),
            p.measured ? "" : (", " + std::to_string(o.nodes) + " node(s)").c_str());
    double dev, host;
    rank_need(q, dev, host);
    bool fits = p.measured || p.memory_gib <= 0 || dev <= p.memory_gib * GiB;
    if (!p.measured)
        fprintf(out, "  memory per rank: %.2f GiB of the device's %.0f GiB: %s\n", dev / GiB, p.memory_gib,
                fits ? "fits" : "does NOT fit");
    if (fits) {
        const StepPrediction s = predict_step(step_schedules(dry, run), q, p, {p.measured, run.world});
        print_step_prediction(s, q, out);
        if (!o.trace.empty())
            write_predicted_trace(o.trace, dry, s, o.predict),
                fprintf(out, "  trace of the predicted step: %s (ui.perfetto.dev, or Chromium's DevTools Performance "
                        "panel, opens it)\n", o.trace.c_str());
        return;
    }
    std::vector<FitOption> options = fitting_options(q, [&](const MemoryQuery& a) {  // (NVMe: where the profile has a disk)
        double d, h; rank_need(a, d, h);
        return d <= p.memory_gib * GiB && (!a.offload_nvme || p.disk_read_gbs > 0);
    });
    if (options.size() > (size_t)3 * FIT_OPTIONS_SHOWN) options.resize(3 * FIT_OPTIONS_SHOWN);  // the cheapest
    for (FitOption& f : options) {
        TrainOptions a = with_flags(o, run, f.flags);
        f.seconds = predict_run(a, make_run_setup(a), p).step_s;
    }
    std::stable_sort(options.begin(), options.end(), [](const FitOption& a, const FitOption& b) {
        return a.seconds < b.seconds;
    });
    if (!o.trace.empty()) fprintf(out, "  no trace: the step does not fit (one of these would)\n");
    fprintf(out, "  these would fit, fastest first (predicted):\n");
    for (size_t i = 0; i < options.size() && i < (size_t)FIT_OPTIONS_SHOWN; i++)
        fprintf(out, "    %-62s %10.0f tokens/s, device %.2f GiB\n", options[i].flags.c_str(),
                (double)q.micro_batch * q.seq_len * q.world * q.micro_steps / options[i].seconds, options[i].dev / GiB);
    if (options.empty()) fprintf(out, "    (none)\n");
}
