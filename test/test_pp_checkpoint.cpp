// Checkpoints of pipelined runs: a whole-model unit is read from the stage of
// the old grid that held it (zero/engine/checkpoint.h, zero/layout/checkpoint_reslice.h).
//   * the files: every rank of an old (d, t, pipeline stages, ZeRO stage) grid
//     writes its optimizer file from arrays laid out as its engine keeps them
//     (its stage's units, the last stage's copy of the embeddings holding a
//     value that must never be read back), and every rank of a new grid reads
//     its arrays back: exactly what cutting the whole model's units its way
//     gives, across numbers of stages (pp 1 included), t, d and ZeRO stage;
//   * through the trainer: a checkpoint of (d=1, t=2, pp=2, ZeRO 3) resumes at
//     the same grid bit for bit, and at pp 1, at (d=2, pp=2, ZeRO 1) and a
//     pp 1 checkpoint at pp 4 within 1e-5 of the uninterrupted run; the
//     MANIFEST records the stages; --consolidate gives the fp32 run's model.bin.
//
// usage: test_pp_checkpoint <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/optim_file_util.h"
#include "test/trainer_run.h"

static float pattern(int g, size_t i, int a) { return (float)(g * 1000000 + (int)i) + 0.25f * a; }

struct Grid {
    int t, d;
    std::string layers;  // per stage; "" = one stage
    int stage;
    PipelinePlan plan() const {
        PipelinePlan p;
        if (!layers.empty()) p.layers = parse_layer_counts(layers);
        return p;
    }
    int pp() const { return layers.empty() ? 1 : (int)parse_layer_counts(layers).size(); }
};

// rank (pipeline stage s, dp, tp)'s arrays under grid g: its units cut from the whole model's patterns
static std::vector<std::vector<float>> arrays_of(const GPT2Config& cfg, const Grid& g, int s, int dp, int tp,
                                                 float other, float head_copy) {
    ParamLayout whole(cfg, 1), layout(cfg, g.t, g.pp() > 1 ? g.plan().range(s) : StageRange{});
    ShardPlan plan(layout.unit_specs(), g.d, SHARD_ALIGN);
    std::vector<std::vector<float>> arr(3, std::vector<float>(g.stage == 0 ? plan.full_numel : plan.shard_numel, other));
    for (int u = 0; u < plan.num_units(); u++)
        for (int a = 0; a < 3; a++) {
            int gu = layout.global_unit(u);
            std::vector<float> full(whole.unit_spec(gu).numel), local(plan.padded[u], 0.0f);
            for (size_t i = 0; i < full.size(); i++) full[i] = pattern(gu, i, a);
            layout.tp_slice_unit(tp, u, full.data(), local.data());
            if (layout.head_copy() && u == layout.embed_unit()) std::fill(local.begin(), local.end(), head_copy);
            size_t lo = g.stage == 0 ? 0 : dp * plan.slice_numel(u), hi = g.stage == 0 ? plan.padded[u] : lo + plan.slice_numel(u);
            for (size_t i = lo; i < hi; i++) arr[a][optimizer_index(plan, g.stage, dp, u, i)] = local[i];
        }
    return arr;
}

static void check_files(const GPT2Config& cfg, const Grid& from, const Grid& to) {
    std::string dir = "pp_checkpoint_files";
    run_command("rm -rf " + dir);
    make_dir(dir);
    const int world = from.t * from.d * from.pp();
    for (int s = 0; s < from.pp(); s++)
        for (int dp = 0; dp < from.d; dp++)
            for (int tp = 0; tp < from.t; tp++) {
                auto arr = arrays_of(cfg, from, s, dp, tp, -1.0f, -5.0f);
                ParamLayout layout(cfg, from.t, from.pp() > 1 ? from.plan().range(s) : StageRange{});
                ShardPlan plan(layout.unit_specs(), from.d, SHARD_ALIGN);
                const float* arrays[3] = {arr[0].data(), arr[1].data(), arr[2].data()};
                int rank = Grid3{from.d, from.t, from.pp()}.rank_of(s, dp, tp);
                write_optim_file(dir,
                                 make_header(CKPT_OPTIM_MAGIC, cfg, 1, world, from.stage, rank, plan.shard_numel, from.t,
                                             from.pp()),
                                 plan, from.stage, arrays);
            }
    size_t wrong = 0, checked = 0;
    for (int s = 0; s < to.pp(); s++)
        for (int dp = 0; dp < to.d; dp++)
            for (int tp = 0; tp < to.t; tp++) {
                ParamLayout layout(cfg, to.t, to.pp() > 1 ? to.plan().range(s) : StageRange{});
                ShardPlan plan(layout.unit_specs(), to.d, SHARD_ALIGN);
                auto expect = arrays_of(cfg, to, s, dp, tp, 0.0f, NAN);
                if (layout.head_copy()) {  // the head's copy: what the first stage's unit 0 holds
                    auto f = arrays_of(cfg, to, 0, dp, tp, 0.0f, NAN);
                    size_t n = to.stage == 0 ? plan.padded[0] : plan.slice_numel(0);
                    for (int a = 0; a < 3; a++) std::copy(f[a].begin(), f[a].begin() + n, expect[a].begin());
                }
                std::vector<std::vector<float>> got(3, std::vector<float>(expect[0].size(), 0.0f));
                float* arrays[3] = {got[0].data(), got[1].data(), got[2].data()};
                read_optim_files(dir, layout, world, from.t, from.plan(), plan, to.stage, dp, tp, arrays);
                for (int a = 0; a < 3; a++)
                    for (size_t i = 0; i < got[a].size(); i++, checked++) wrong += got[a][i] != expect[a][i];
            }
    EXPECT(wrong == 0 && checked > 0, "(t=%d d=%d stages '%s' z%d) -> (t=%d d=%d stages '%s' z%d): %zu of %zu wrong",
           from.t, from.d, from.layers.c_str(), from.stage, to.t, to.d, to.layers.c_str(), to.stage, wrong, checked);
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));

    // --- the files
    GPT2Config cfg = gpt2_config_from_descriptor("L=5,H=4,C=48,V=100,T=12");
    std::vector<Grid> grids = {{1, 1, "", 1},  {2, 2, "", 3},    {1, 2, "3,2", 2}, {2, 1, "1,1,3", 0},
                               {1, 3, "2,1,1,1", 1}, {2, 2, "4,1", 3}, {4, 1, "2,3", 1}};
    for (const Grid& from : grids)
        for (const Grid& to : grids) check_files(cfg, from, to);

    // --- the trainer
    std::string dir = "pp_checkpoint";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 30000, 5);
    base.model = TINY_4_LAYERS;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.total_batch = 4 * 32 * 2;  // 8 sequences a step
    base.extra = "-l 2e-3 -u 2 -c 0.1";
    auto grid = [&](const std::string& out, int t, int d, int pp, int z, int steps) {
        TrainerRun r = base;
        r.out = dir + "/" + out;
        r.ranks = t * d * pp;
        r.micro_batch = 4 / d;
        r.stage = z;
        r.steps = steps;
        r.extra += " --tp " + std::to_string(t) + " --pp " + std::to_string(pp);
        return r;
    };
    TrainerRun straight_run = grid("straight", 2, 1, 2, 3, 10);
    straight_run.checkpoint_every = 5;
    RunResult straight = straight_run.run();
    grid("first_half", 2, 1, 2, 3, 5).run();
    auto resumed_on = [&](const std::string& from, const std::string& copy, int t, int d, int pp, int z) {
        run_command("rm -rf " + dir + "/" + copy + " && cp -r " + dir + "/" + from + " " + dir + "/" + copy);
        TrainerRun r = grid(copy, t, d, pp, z, 10);
        r.resume = true;
        return r.run();
    };
    RunResult same = resumed_on("first_half", "same", 2, 1, 2, 3);
    EXPECT(same.train_losses == straight.train_losses && files_identical(same.model_at(10), straight.model_at(10)),
           "resume at the same grid is not bit-exact");
    for (int r = 0; r < 4; r++)
        EXPECT(files_identical(optim_file(checkpoint_dir(same.out, 10), r), optim_file(checkpoint_dir(straight.out, 10), r)),
               "optimizer file %d differs after a resume at the same grid", r);
    RunResult one = resumed_on("first_half", "pp1", 1, 1, 1, 1);
    RunResult dp2 = resumed_on("first_half", "d2_pp2_z1", 1, 2, 2, 1);
    // and the other way: a --pp 1 checkpoint resumed by 4 stages
    grid("plain_half", 1, 1, 1, 2, 5).run();
    RunResult plain_straight = grid("plain_straight", 1, 1, 1, 2, 10).run();
    RunResult to_pp4 = resumed_on("plain_half", "pp4", 1, 1, 4, 2);
    struct Check {
        const RunResult* r;
        const RunResult* want;
    };
    // (a pipeline alone changes no arithmetic: from --pp 1 to --pp 4 at the same d, t and ZeRO stage, to the bit)
    EXPECT(to_pp4.train_losses == plain_straight.train_losses &&
               files_identical(to_pp4.model_at(10), plain_straight.model_at(10)),
           "a --pp 1 checkpoint resumed by 4 stages is not bit-exact");
    for (Check c : {Check{&one, &straight}, Check{&dp2, &straight}, Check{&to_pp4, &plain_straight}}) {
        const RunResult& r = *c.r;
        EXPECT(r.output.find("resumed from") != std::string::npos, "%s did not resume:\n%s", r.command.c_str(),
               r.output.c_str());
        double loss_gap = r.train_losses.size() == 10 && c.want->train_losses.size() == 10
                              ? std::fabs(r.train_losses[9] - c.want->train_losses[9]) / c.want->train_losses[9]
                              : 1.0;
        double params_gap = relative_error(read_model_params(r.model_at(10)), read_model_params(c.want->model_at(10)));
        EXPECT(loss_gap <= 1e-5 && params_gap <= 1e-5, "%s: step-10 loss %.3g, parameters %.3g from the uninterrupted run",
               r.command.c_str(), loss_gap, params_gap);
        printf("%s: step-10 loss within %.2g, parameters %.2g\n", r.command.c_str(), loss_gap, params_gap);
    }
    CheckpointManifest m;
    std::string why;
    EXPECT(read_manifest(checkpoint_dir(straight.out, 10), m, why) && m.id.world == 4 && m.id.tp == 2 &&
               m.id.pp_layers == std::vector<int>({2, 2}),
           "manifest of the pipelined run: %s world %d tp %d stages %d", why.c_str(), m.id.world, m.id.tp, m.id.pp());
    TrainerRun c(base.trainer);
    c.extra = "--consolidate " + checkpoint_dir(straight.out, 10);
    RunResult consolidated = c.run();
    EXPECT(files_identical(checkpoint_dir(straight.out, 10) + "/model_fp32.bin", straight.model_at(10)) &&
               consolidated.output.find("2 pipeline stages") != std::string::npos,
           "the consolidated pipelined checkpoint is not its model.bin:\n%s", consolidated.output.c_str());
    return test_summary("pp_checkpoint");
}
