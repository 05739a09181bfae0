// Gradient clipping is by the norm of the whole model's gradient: every
// data-parallel rank must scale its slices by the one factor the group's norm
// gives, whatever the stage, the offload, the tensor or pipeline grid.
//
// The runs clip hard (--grad_clip 0.02, against unclipped norms near 1.5) and
// take a large AdamW epsilon (--adam_eps 0.1, against gradient elements near
// 1e-4 once clipped): AdamW then moves each parameter by about lr x m / eps,
// in proportion to the clipped gradient, so a wrong clip factor shows at its
// full size (with the default epsilon AdamW divides almost all of it out,
// which is how a rank clipping by its own shard's norm went unnoticed).
//
// Each run is held to one rank at stage 0 by the change it made to the
// parameters: |p - p_ref| / |p_ref - p_init| <= 1e-4 (the ranks sum the
// gradients in another order: measured about 1e-6 here). A rank that clipped
// by its own slices' norm would move its parameters by the wrong factor:
// about sqrt(N) too far at N data-parallel ranks. The reference is also held
// to an unclipped run: clipping must change its update by more than 50%.
//
// usage: test_clip_across_ranks <path to train_gpt2_zero_cpu>
#include <cmath>
#include <string>
#include <vector>

#include "test/trainer_run.h"

namespace {

// |a - b| / |b - base|
double error_of_update(const std::vector<float>& a, const std::vector<float>& b, const std::vector<float>& base) {
    double diff = 0, update = 0;
    for (size_t i = 0; i < a.size() && i < b.size() && i < base.size(); i++) {
        diff += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
        update += ((double)b[i] - base[i]) * ((double)b[i] - base[i]);
    }
    return a.size() == b.size() && b.size() == base.size() && update > 0 ? std::sqrt(diff / update) : INFINITY;
}

}  // namespace

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "clip_across_ranks";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 3);
    const int steps = 4, global_seqs = 8, T = 32;  // (params_of reads step 4 by default)
    base.model = TINY, base.train = base.val = dir + "/train.bin", base.seq_len = T;
    base.total_batch = global_seqs * T, base.steps = steps, base.checkpoint_every = steps;
    const std::string optimizer = "-l 1e-2 -u 0 -q 1 -c 0 --seed 11 --adam_eps 0.1 --grad_clip ";

    auto params_of = [&](const std::string& name, int ranks, int stage, const std::string& flags, int at = 4) {
        TrainerRun run = base;
        run.ranks = ranks, run.stage = stage, run.micro_batch = 2;
        run.out = dir + "/" + name, run.extra = optimizer + flags;
        if (at == 0) run.steps = 0;
        RunResult r = run.run();
        std::vector<float> p = read_model_params(r.model_at(at));
        EXPECT(!p.empty(), "%s: no model at step %d", name.c_str(), at);
        return p;
    };
    const std::vector<float> init = params_of("init", 1, 0, "0.02", 0);
    const std::vector<float> ref = params_of("ref", 1, 0, "0.02");
    const std::vector<float> unclipped = params_of("unclipped", 1, 0, "0");
    const double clip_effect = error_of_update(unclipped, ref, init);
    printf("%-44s %10.3g   (clipping's own effect: must be > 0.5)\n", "1 rank, no clipping", clip_effect);
    EXPECT(clip_effect > 0.5, "clipping changed the update by only %.3g of itself: it did not act", clip_effect);

    struct Case {
        int ranks, stage;
        std::string flags;
    };
    std::vector<Case> cases;
    for (int n : {2, 4})
        for (int z = 0; z <= 3; z++) {
            cases.push_back({n, z, ""});
            if (z >= 1) cases.push_back({n, z, "--offload_optimizer cpu"});
        }
    cases.push_back({2, 2, "--offload_optimizer cpu --offload_delay_steps 1"});
    cases.push_back({4, 1, "--tp 2"});
    cases.push_back({4, 3, "--pp 2"});
    cases.push_back({4, 2, "--pp 2 --tp 2 --offload_optimizer cpu"});
    for (const Case& c : cases) {
        std::string name = "n" + std::to_string(c.ranks) + "z" + std::to_string(c.stage);
        for (char ch : c.flags) name += isalnum((unsigned char)ch) ? ch : '_';
        const bool delayed = c.flags.find("delay") != std::string::npos;
        std::vector<float> p = params_of(name, c.ranks, c.stage, "0.02 " + c.flags);
        // (the delayed update applies each step's AdamW a step late: its reference is its own 1-rank run)
        const std::vector<float>& want = delayed ? params_of(name + "_1rank", 1, c.stage, "0.02 " + c.flags) : ref;
        const double e = error_of_update(p, want, init);
        printf("%-44s %10.3g\n", (std::to_string(c.ranks) + " ranks, stage " + std::to_string(c.stage) + " " + c.flags).c_str(), e);
        EXPECT(e <= 1e-4, "%d ranks, stage %d %s: the update differs from one rank's by %.3g of itself", c.ranks,
               c.stage, c.flags.c_str(), e);
    }
    return test_summary("clip_across_ranks");
}
