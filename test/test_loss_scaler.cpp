// fp16 dynamic loss scaling with DeepSpeed's semantics:
//   * the scaler alone: hysteresis, halving, the floor, doubling after the
//     window, static scales, and no scaling for bf16/fp32;
//   * the trainer in fp16 with an absurd initial scale (2^40): the gradients
//     really overflow, every step is skipped on every rank until the scale has
//     come down, the scale halves once hysteresis is spent, skipped steps leave
//     the parameters untouched, and no inf/NaN reaches the master weights.
//
// usage: test_loss_scaler <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>
#include <vector>

#include "test/trainer_run.h"
#include "zero/engine/loss_scaler.h"
#include "zero/run/run_setup.h"

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));

    // --- the scaler alone: initial 2^4, window 3, hysteresis 2, floor 2
    LossScalerConfig cfg;
    cfg.initial_scale_power = 4;
    cfg.window = 3;
    cfg.hysteresis = 2;
    cfg.min_scale = 2.0f;
    LossScaler s(cfg, true);
    // overflow flags, and the scale after each update
    const bool overflow[] = {true, true, false, false, false, true, true, true, true, true, false, false, false};
    const float expect[] = {16, 8, 8, 8, 16, 16, 8, 4, 2, 2, 2, 2, 4};
    for (size_t i = 0; i < sizeof(overflow); i++) {
        s.update(overflow[i]);
        EXPECT(s.scale() == expect[i], "update %zu (overflow %d): scale %g, expected %g", i, overflow[i], s.scale(),
               expect[i]);
    }
    LossScalerConfig fixed;
    fixed.static_scale = 128.0f;
    LossScaler st(fixed, true);
    for (bool o : {true, true, false}) st.update(o);
    EXPECT(st.scale() == 128.0f, "a static scale moved to %g", st.scale());
    LossScaler off(cfg, false);
    off.update(true);
    EXPECT(off.scale() == 1.0f, "bf16/fp32 must not scale (got %g)", off.scale());

    // --- the trainer, fp16, gradients that really overflow
    std::string dir = "loss_scaler";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 40000, 4);
    // fp16, stage 2 on two ranks, from a loss scale of 2^40
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.micro_batch = 4;
    base.total_batch = 256;
    base.precision = "fp16";
    base.stage = 2;
    base.ranks = 2;
    base.extra = "-l 3e-3";
    TrainerRun overflowing = base;
    overflowing.extra += " --initial_scale_power 40";
    overflowing.steps = 60;
    overflowing.out = dir + "/run";
    RunResult r = overflowing.run();
    std::vector<double> scales;  // the scale each step used, and whether it was skipped
    std::vector<bool> skipped;
    for (const StepLine& step : r.steps)
        if (!std::isnan(step.scale)) scales.push_back(step.scale), skipped.push_back(step.skipped);
    const size_t steps = 60;
    size_t first_ok = 0;
    EXPECT(scales.size() == steps, "found %zu scale readings", scales.size());
    if (scales.size() == steps) {
        EXPECT(scales[0] == 1099511627776.0 && skipped[0], "step 1: scale %g, skipped %d", scales[0], (int)skipped[0]);
        EXPECT(scales[1] == scales[0] && skipped[1], "step 2 spends hysteresis at the same scale");
        while (first_ok < steps && skipped[first_ok]) first_ok++;
        EXPECT(first_ok > 5 && first_ok < steps / 2, "the first clean step is %zu", first_ok + 1);
        // every step's scale is what DeepSpeed's rules give for the overflows seen so far
        LossScalerConfig dflt = loss_scaler_config(TrainOptions{});  // the trainer's defaults
        dflt.initial_scale_power = 40;
        LossScaler sim(dflt, true);
        for (size_t i = 0; i < steps; i++) {
            EXPECT(scales[i] == sim.scale(), "step %zu: scale %g, the rules give %g", i + 1, scales[i], sim.scale());
            sim.update(skipped[i]);
        }
        printf("fp16: %zu steps skipped from scale 2^40 down to %g; training went on from there\n", first_ok,
               first_ok < steps ? scales[first_ok] : 0.0);
    }
    std::vector<float> params = read_model_params(r.model_at((int)steps));
    size_t bad = 0;
    for (float p : params) bad += !std::isfinite(p);
    EXPECT(!params.empty() && bad == 0, "%zu non-finite parameters after overflowing steps", bad);
    const std::vector<double>& losses = r.train_losses;
    EXPECT(losses.size() == steps && first_ok < steps && losses.back() < losses[first_ok] - 0.1,
           "fp16 training did not learn after recovering");

    // skipped steps do not touch the parameters: two skipped steps leave the initial model
    TrainerRun two_skipped = overflowing;
    two_skipped.steps = 2;
    two_skipped.out = dir + "/skipped";
    TrainerRun initial = base;  // one step that changes nothing
    initial.extra += " -l 0 -c 0";
    initial.steps = 1;
    initial.out = dir + "/initial";
    std::string after_skips = two_skipped.run().model_at(2);
    std::string unchanged = initial.run().model_at(1);
    EXPECT(files_identical(after_skips, unchanged), "skipped steps changed the parameters");
    return test_summary("loss_scaler");
}
