// Checkpoints of pipelined runs: a whole-model unit is read from the stage of
// the old grid that held it (zero/engine/checkpoint.h, zero/layout/checkpoint_reslice.h).
//   * the files: every rank of an old (d, t, pipeline stages, ZeRO stage) grid
//     writes its optimizer file from arrays laid out as its engine keeps them
//     (its stage's units, the last stage's copy of the embeddings holding a
//     value that must never be read back), and every rank of a new grid reads
//     its arrays back: exactly what cutting the whole model's units its way
//     gives, across numbers of stages (pp 1 included), t, d and ZeRO stage;
//   * through the trainer (each resume in a copy of the uninterrupted run's
//     directory as it was at a checkpoint): a checkpoint of (d=1, t=2, pp=2,
//     ZeRO 3) resumes at the same grid bit for bit, at pp 1 and at (d=2,
//     pp=2, ZeRO 1) within 1e-5 of the uninterrupted run, and a pp 1
//     checkpoint at pp 4 bit for bit; the MANIFEST records the stages;
//     --consolidate gives the fp32 run's model.bin;
//   * bf16 and fp16, at (d=1, pp=2, ZeRO 1) with t=1 and t=2: a checkpoint
//     continues bit for bit at the same grid and at pp 4 (t=1) or pp 1 (t=2),
//     and that run's checkpoint again at pp 2 (the 16-bit parameters rebuilt
//     from the masters must round as the step that wrote them did, by the
//     whole model's keys).
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
    // run `r` (-y 1) in a copy of `from`'s directory as it was at its step-`step` checkpoint (the later ones removed)
    auto continued = [&](const RunResult& from, int step, TrainerRun r) {
        run_command("rm -rf " + r.out + " && cp -r " + from.out + " " + r.out);
        for (int later : checkpoint_steps(r.out))
            if (later > step) run_command("rm -rf " + checkpoint_dir(r.out, later));
        r.resume = true;
        RunResult done = r.run();
        EXPECT(done.output.find(strf("resumed from %s (step %d)", checkpoint_dir(r.out, step).c_str(), step)) !=
                   std::string::npos,
               "%s did not resume from step %d:\n%s", done.command.c_str(), step, done.output.c_str());
        return done;
    };
    TrainerRun straight_run = grid("straight", 2, 1, 2, 3, 10);
    straight_run.checkpoint_every = 5;
    RunResult straight = straight_run.run();
    RunResult same = continued(straight, 5, grid("same", 2, 1, 2, 3, 10));
    EXPECT(same.train_losses == straight.train_losses && files_identical(same.model_at(10), straight.model_at(10)),
           "resume at the same grid is not bit-exact");
    for (int r = 0; r < 4; r++)
        EXPECT(files_identical(optim_file(checkpoint_dir(same.out, 10), r), optim_file(checkpoint_dir(straight.out, 10), r)),
               "optimizer file %d differs after a resume at the same grid", r);
    RunResult one = continued(straight, 5, grid("pp1", 1, 1, 1, 1, 10));
    RunResult dp2 = continued(straight, 5, grid("d2_pp2_z1", 1, 2, 2, 1, 10));
    // and the other way: a --pp 1 checkpoint resumed by 4 stages
    TrainerRun plain_run = grid("plain_straight", 1, 1, 1, 2, 10);
    plain_run.checkpoint_every = 5;
    RunResult plain_straight = plain_run.run();
    RunResult to_pp4 = continued(plain_straight, 5, grid("pp4", 1, 1, 4, 2, 10));
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
        double loss_gap = r.train_losses.size() == 10 && c.want->train_losses.size() == 10
                              ? std::fabs(r.train_losses[9] - c.want->train_losses[9]) / c.want->train_losses[9]
                              : 1.0;
        double params_gap = relative_error(read_model_params(r.model_at(10)), read_model_params(c.want->model_at(10)));
        EXPECT(loss_gap <= 1e-5 && params_gap <= 1e-5, "%s: step-10 loss %.3g, parameters %.3g from the uninterrupted run",
               r.command.c_str(), loss_gap, params_gap);
        printf("%s: step-10 loss within %.2g, parameters %.2g\n", r.command.c_str(), loss_gap, params_gap);
    }

    // --- bf16 and fp16: a resumed run rounds its 16-bit parameters from the masters by the whole
    // model's keys, as the step that wrote them did (a later stage's keys start at its units' place in
    // the whole model), so it continues bit for bit at the same grid and at another number of stages
    auto in16 = [](TrainerRun r, const char* precision) {  // checkpoints every 2 steps
        r.precision = precision;
        r.checkpoint_every = 2;
        return r;
    };
    for (const char* precision : {"bf16", "fp16"})
        for (int t : {1, 2}) {
            const std::string name = std::string(precision) + "_t" + std::to_string(t);
            const RunResult whole = in16(grid(name, t, 1, 2, 1, 6), precision).run();
            // from its step-2 checkpoint at --pp 2 and at another number of stages (t=1: four, not one
            // rank, whose threads crawl on a busy machine; t=2: one), that run's step 4 back at --pp 2
            const int other = t == 1 ? 4 : 1;
            const RunResult same16 = continued(whole, 2, in16(grid(name + "_same", t, 1, 2, 1, 6), precision));
            const RunResult other16 =
                continued(whole, 2, in16(grid(name + "_pp" + std::to_string(other), t, 1, other, 1, 6), precision));
            const RunResult back16 = continued(other16, 4, in16(grid(name + "_back", t, 1, 2, 1, 6), precision));
            for (const RunResult* r : {&same16, &other16, &back16}) {
                std::string losses = strf("%zu losses", r->train_losses.size());  // or the first that differs
                for (size_t i = 0; i < r->train_losses.size() && i < whole.train_losses.size(); i++)
                    if (r->train_losses[i] != whole.train_losses[i]) {
                        losses = strf("step-%zu loss %.6f against %.6f", i + 1, r->train_losses[i], whole.train_losses[i]);
                        break;
                    }
                EXPECT(r->train_losses.size() == 6 && r->train_losses == whole.train_losses &&
                           files_identical(r->model_at(6), whole.model_at(6)),
                       "%s: not bit for bit the uninterrupted run: %s, parameters %.3g apart (relative)",
                       r->command.c_str(), losses.c_str(),
                       relative_error(read_model_params(r->model_at(6)), read_model_params(whole.model_at(6))));
            }
            for (const RunResult* r : {&same16, &back16})
                for (int k = 0; k < 2 * t; k++)
                    EXPECT(files_identical(optim_file(checkpoint_dir(r->out, 6), k),
                                           optim_file(checkpoint_dir(whole.out, 6), k)),
                           "%s: optimizer file %d differs from the uninterrupted run's", r->command.c_str(), k);
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
