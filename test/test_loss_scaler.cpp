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

#include "test/trainer_harness.h"
#include "zero/engine/checkpoint.h"
#include "zero/engine/loss_scaler.h"
#include "zero/run/run_setup.h"

int main(int argc, char** argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <train_gpt2_zero_cpu>\n", argv[0]);
        return 2;
    }
    std::string trainer = argv[1];

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
    run_command("rm -rf " + dir);
    make_dir(dir);
    write_markov_shard(dir + "/train.bin", 512, 40000, 4);
    std::string common = trainer + " -e L=2,H=4,C=64,V=512,T=32 -t 32 -p fp16 -v 0 -s 0 -i " + dir + "/train.bin" +
                         " -d 256 -l 3e-3";
    CommandResult r = run_command(common + " -z 2 --ranks 2 -b 4 -x 60 --initial_scale_power 40 -o " + dir + "/run");
    EXPECT(r.status == 0, "fp16 run failed:\n%s", r.output.c_str());
    std::vector<double> scales;
    std::vector<bool> skipped;
    for (size_t pos = r.output.find("| scale "); pos != std::string::npos; pos = r.output.find("| scale ", pos + 1)) {
        scales.push_back(atof(r.output.c_str() + pos + 8));
        size_t eol = r.output.find('\n', pos);
        skipped.push_back(r.output.substr(pos, eol - pos).find("(skipped)") != std::string::npos);
    }
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
    std::vector<float> params = read_model_params(checkpoint_dir(dir + "/run", (int)steps) + "/model.bin");
    size_t bad = 0;
    for (float p : params) bad += !std::isfinite(p);
    EXPECT(!params.empty() && bad == 0, "%zu non-finite parameters after overflowing steps", bad);
    std::vector<double> losses = read_train_losses(dir + "/run/main.log");
    EXPECT(losses.size() == steps && first_ok < steps && losses.back() < losses[first_ok] - 0.1,
           "fp16 training did not learn after recovering");

    // skipped steps do not touch the parameters: two skipped steps leave the initial model
    run_command(common + " -z 2 --ranks 2 -b 4 -x 2 --initial_scale_power 40 -o " + dir + "/skipped");
    run_command(common + " -z 2 --ranks 2 -b 4 -x 1 -l 0 -c 0 -o " + dir + "/initial");
    EXPECT(files_identical(checkpoint_dir(dir + "/skipped", 2) + "/model.bin",
                           checkpoint_dir(dir + "/initial", 1) + "/model.bin"),
           "skipped steps changed the parameters");
    return test_summary("loss_scaler");
}
