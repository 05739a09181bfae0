// ZeRO is bookkeeping: every stage and world size must train the same model.
//
// Runs the CPU trainer for 10 steps on a small model for stages 0-3, N = 1..4
// emulated ranks, with and without gradient accumulation, all with the same
// global batch, and checks:
//   * losses and parameters match the N = 1, stage 0 run within 1e-5 relative
//     (different N sum gradients in a different order, so bits differ);
//   * at a fixed N, stages give bit-identical parameters and losses.
//     With gradient accumulation stages 0-1 accumulate micro-steps locally and
//     reduce once, while stages 2-3 reduce every micro-step and accumulate the
//     reduced slices: (g1+g2)+(h1+h2) versus (g1+h1)+(g2+h2) in float. Those
//     two groups may differ in the last bits; within each group the bits
//     match. Across groups it is a summation-order difference like the one
//     between world sizes, which Adam carries through 10 steps: measured
//     about 1.3e-6 relative here, bounded at 5e-6.
//
// usage: test_zero_stages <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <map>
#include <string>

#include "test/trainer_run.h"

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    std::string dir = "zero_stages";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 40000, 1);
    write_markov_shard(dir + "/val.bin", TINY_VOCAB, 8000, 2);

    // every run: the same model, data, schedule and global batch of 24 sequences
    const int global_seqs = 24, T = 32, steps = 10;
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.val = dir + "/val.bin";
    base.seq_len = T;
    base.total_batch = global_seqs * T;
    base.steps = steps;
    base.checkpoint_every = steps;
    base.extra = "-l 3e-3 -u 3 -q 0.1 -c 0.1 --seed 7";

    struct Run {
        std::vector<double> losses;
        std::vector<float> params;
        std::string model_path;
    };
    std::map<std::string, Run> runs;
    auto key = [](int z, int n, int a) { return "z" + std::to_string(z) + "n" + std::to_string(n) + "a" + std::to_string(a); };

    // stage z on n ranks with a micro-steps per step
    for (int a : {1, 2})
        for (int n = 1; n <= 4; n++)
            for (int z = 0; z <= 3; z++) {
                std::string k = key(z, n, a);
                TrainerRun run = base;
                run.stage = z;
                run.ranks = n;
                run.micro_batch = global_seqs / (n * a);
                run.out = dir + "/" + k;
                RunResult r = run.run();
                Run result;
                result.losses = r.train_losses;
                result.model_path = r.model_at(steps);
                result.params = read_model_params(result.model_path);
                EXPECT((int)result.losses.size() == steps, "%s: %zu losses in main.log", k.c_str(),
                       result.losses.size());
                runs[k] = result;
            }

    const Run& ref = runs[key(0, 1, 1)];
    EXPECT(!ref.params.empty(), "the reference run wrote no model");
    EXPECT(ref.losses.size() == (size_t)steps && ref.losses.back() < ref.losses.front() - 0.1,
           "the reference run did not learn (loss %f -> %f)", ref.losses.empty() ? 0.0 : ref.losses.front(),
           ref.losses.empty() ? 0.0 : ref.losses.back());

    printf("%-10s %14s %14s   %s\n", "run", "loss rel err", "param rel err", "vs. same N stage 0");
    for (int a : {1, 2})
        for (int n = 1; n <= 4; n++)
            for (int z = 0; z <= 3; z++) {
                std::string k = key(z, n, a);
                const Run& r = runs[k];
                double le = max_relative_loss_error(r.losses, ref.losses);
                double pe = relative_error(r.params, ref.params);
                EXPECT(le <= 1e-5, "%s: losses differ from N=1 stage 0 by %.3g relative", k.c_str(), le);
                EXPECT(pe <= 1e-5, "%s: parameters differ from N=1 stage 0 by %.3g relative", k.c_str(), pe);

                // the same world size and accumulation at stage 0, and at the first stage of z's group
                const Run& s0 = runs[key(0, n, a)];
                const Run& group = runs[key(a == 1 || z < 2 ? 0 : 2, n, a)];
                bool same_bits = files_identical(r.model_path, group.model_path) && r.losses == group.losses;
                EXPECT(same_bits, "%s: not bit-identical to %s", k.c_str(), key(a == 1 || z < 2 ? 0 : 2, n, a).c_str());
                double se = relative_error(r.params, s0.params);
                EXPECT(se <= 5e-6, "%s: differs from stage 0 at the same N by %.3g", k.c_str(), se);
                printf("%-10s %14.3g %14.3g   %s\n", k.c_str(), le, pe,
                       files_identical(r.model_path, s0.model_path) ? "bit-identical" : "differs (see header)");
            }
    return test_summary("zero_stages");
}
