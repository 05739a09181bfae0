// Checkpoints of tensor-parallel runs: the full tensor is the common ground
// between two t x d grids.
//   * the pure mapping (zero/layout/checkpoint_reslice.h): for every old grid,
//     new grid, new rank and range, the runs fill exactly what cutting the full
//     units with the new t gives, read from files laid out by cutting the full
//     units with the old t and slicing them under the old data plan (the oracle
//     is tp_slice_unit, i.e. tp_for_each_run; the mapping uses tp_locate);
//   * the same through optimizer files written and read back by the engine's
//     layout at each stage;
//   * through the trainer: a checkpoint at (t=2, d=2, stage 3) resumes at
//     (t=1, d=4, stage 1) and at (t=4, d=1, stage 0) within 1e-5 of the
//     uninterrupted run, and at (t=2, d=2, stage 3) bit for bit; model.bin is
//     the full model (an ordinary llm.c file, within 1e-5 of a one-rank run's),
//     and --consolidate of a tp checkpoint gives its fp32 masters.
//
// usage: test_tp_checkpoint <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/optim_file_util.h"
#include "test/trainer_run.h"
#include "zero/layout/checkpoint_reslice.h"

// a recognisable value for element i of the full unit u, in array a
static float pattern(int u, size_t i, int a) { return (float)(u * 1000000 + (int)i) + 0.25f * a; }

// Old grid (t, d) -> new grid (t2, d2): every new rank, its whole unit (stage 0)
// and its data slice (stages 1-3).
static void check_mapping(const GPT2Config& cfg, int t, int d, int t2, int d2) {
    ParamLayout whole(cfg, 1), old_layout(cfg, t), new_layout(cfg, t2);
    ShardPlan old_plan(old_layout.unit_specs(), d, SHARD_ALIGN), new_plan(new_layout.unit_specs(), d2, SHARD_ALIGN);
    // the old files: file dp*t + tp holds, per array, slice dp of tp's part of each unit
    std::vector<std::vector<float>> files(t * d, std::vector<float>(3 * old_plan.shard_numel, -1.0f));
    std::vector<std::vector<float>> full_units(whole.num_units());
    for (int u = 0; u < whole.num_units(); u++) {
        for (int a = 0; a < 3; a++) {
            std::vector<float> full(whole.unit_spec(u).numel);
            for (size_t i = 0; i < full.size(); i++) full[i] = pattern(u, i, a);
            for (int tp = 0; tp < t; tp++) {
                std::vector<float> local(old_plan.padded[u], 0.0f);
                old_layout.tp_slice_unit(tp, u, full.data(), local.data());
                size_t s = old_plan.slice_numel(u);
                for (int dp = 0; dp < d; dp++)
                    std::copy(local.begin() + dp * s, local.begin() + (dp + 1) * s,
                              files[dp * t + tp].begin() + a * old_plan.shard_numel + old_plan.shard_offset[u]);
            }
        }
    }
    size_t bad = 0, checked = 0, stray = 0;
    for (int tp = 0; tp < t2; tp++)
        for (int u = 0; u < new_layout.num_units(); u++) {
            std::vector<float> full(whole.unit_spec(u).numel);
            for (int range = 0; range <= d2; range++) {  // range d2: the whole unit; else data slice `range`
                size_t lo = range == d2 ? 0 : range * new_plan.slice_numel(u);
                size_t hi = std::min(range == d2 ? new_plan.padded[u] : lo + new_plan.slice_numel(u),
                                     new_plan.units[u].numel);
                if (lo >= hi) continue;
                std::vector<ResliceRun> runs = reslice_runs(old_layout, old_plan, u, 0, new_layout, tp, u, lo, hi);
                for (int a = 0; a < 3; a++) {
                    for (size_t i = 0; i < full.size(); i++) full[i] = pattern(u, i, a);
                    std::vector<float> expect(new_plan.padded[u], 0.0f), got(new_plan.padded[u], 0.0f);
                    new_layout.tp_slice_unit(tp, u, full.data(), expect.data());
                    size_t last_end = 0;
                    for (const ResliceRun& r : runs) {
                        bool ok = r.file >= 0 && r.file < t * d && r.at >= lo && r.at + r.n <= hi && r.at >= last_end &&
                                  r.offset + r.n <= old_plan.shard_numel && r.n > 0;
                        if (!ok) {
                            stray++;
                            continue;
                        }
                        last_end = r.at + r.n;
                        const float* src = files[r.file].data() + a * old_plan.shard_numel + r.offset;
                        std::copy(src, src + r.n, got.begin() + r.at);
                    }
                    for (size_t i = 0; i < got.size(); i++, checked++)
                        bad += got[i] != (i >= lo && i < hi ? expect[i] : 0.0f);
                }
            }
        }
    EXPECT(bad == 0 && stray == 0 && checked > 0,
           "%s: t=%d d=%d -> t=%d d=%d: %zu of %zu values wrong, %zu runs out of place", describe_config(cfg).c_str(), t,
           d, t2, d2, bad, checked, stray);
}

// The same through the files: each rank of an old (t, d, stage) grid writes
// its optimizer file from arrays laid out as its engine keeps them, and each
// rank of a new (t2, d2, stage2) grid reads its arrays back.
static void check_files(const GPT2Config& cfg, int t, int d, int stage, int t2, int d2, int stage2) {
    std::string dir = "tp_checkpoint_files";
    make_dir(dir);
    ParamLayout whole(cfg, 1), old_layout(cfg, t), new_layout(cfg, t2);
    ShardPlan old_plan(old_layout.unit_specs(), d, SHARD_ALIGN), new_plan(new_layout.unit_specs(), d2, SHARD_ALIGN);
    // rank (dp, tp)'s arrays under `layout`/`plan` at `st`, from the full units' patterns (unowned: `other`)
    auto arrays_of = [&](const ParamLayout& layout, const ShardPlan& plan, int st, int dp, int tp, float other) {
        std::vector<std::vector<float>> arr(3, std::vector<float>(st == 0 ? plan.full_numel : plan.shard_numel, other));
        for (int u = 0; u < plan.num_units(); u++)
            for (int a = 0; a < 3; a++) {
                std::vector<float> full(whole.unit_spec(u).numel), local(plan.padded[u], 0.0f);
                for (size_t i = 0; i < full.size(); i++) full[i] = pattern(u, i, a);
                layout.tp_slice_unit(tp, u, full.data(), local.data());
                size_t lo = st == 0 ? 0 : dp * plan.slice_numel(u), hi = st == 0 ? plan.padded[u] : lo + plan.slice_numel(u);
                for (size_t i = lo; i < hi; i++) arr[a][optimizer_index(plan, st, dp, u, i)] = local[i];
            }
        return arr;
    };
    for (int dp = 0; dp < d; dp++)
        for (int tp = 0; tp < t; tp++) {
            auto arr = arrays_of(old_layout, old_plan, stage, dp, tp, -1.0f);
            const float* arrays[3] = {arr[0].data(), arr[1].data(), arr[2].data()};
            write_optim_file(dir,
                             make_header(CKPT_OPTIM_MAGIC, cfg, 1, t * d, stage, dp * t + tp, old_plan.shard_numel, t),
                             old_plan, stage, arrays);
        }
    size_t wrong = 0, checked = 0;
    for (int dp = 0; dp < d2; dp++)
        for (int tp = 0; tp < t2; tp++) {
            auto expect = arrays_of(new_layout, new_plan, stage2, dp, tp, 0.0f);
            std::vector<std::vector<float>> got(3, std::vector<float>(expect[0].size(), 0.0f));
            float* arrays[3] = {got[0].data(), got[1].data(), got[2].data()};
            read_optim_files(dir, new_layout, t * d, t, PipelinePlan{}, new_plan, stage2, dp, tp, arrays);
            for (int a = 0; a < 3; a++)
                for (size_t i = 0; i < got[a].size(); i++, checked++) wrong += got[a][i] != expect[a][i];
        }
    EXPECT(wrong == 0 && checked > 0, "files of t=%d d=%d stage %d read by t=%d d=%d stage %d: %zu of %zu values wrong",
           t, d, stage, t2, d2, stage2, wrong, checked);
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));

    // --- the mapping, pure arithmetic
    struct Grid {
        int t, d;
    };
    // TINY, and a shape whose units do not divide evenly by the data ranks
    for (const char* shape : {TINY, "L=1,H=4,C=48,V=100,T=12"}) {
        GPT2Config cfg = gpt2_config_from_descriptor(shape);
        for (Grid from : {Grid{1, 1}, Grid{2, 2}, Grid{4, 1}, Grid{1, 3}, Grid{4, 3}})
            for (Grid to : {Grid{1, 1}, Grid{1, 4}, Grid{4, 1}, Grid{2, 2}, Grid{2, 3}, Grid{4, 2}})
                check_mapping(cfg, from.t, from.d, to.t, to.d);
    }
    GPT2Config tiny = gpt2_config_from_descriptor(TINY);
    check_files(tiny, 2, 2, 3, 1, 4, 1);
    check_files(tiny, 2, 2, 3, 4, 1, 0);
    check_files(tiny, 4, 1, 0, 2, 3, 2);
    check_files(tiny, 1, 3, 1, 2, 2, 3);

    // --- the trainer: (t=2, d=2, stage 3) checkpoints
    std::string dir = "tp_checkpoint";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 30000, 5);
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    // constant lr after warmup: a run stopped at step 5 follows the same schedule as one going to 10
    base.extra = "-l 2e-3 -u 2 -c 0.1 -f 1";
    // t x d ranks at stage z, 4 sequences per step in all, into tp_checkpoint/<out>
    auto grid = [&](const std::string& out, int t, int d, int z, int steps) {
        TrainerRun r = base;
        r.out = dir + "/" + out;
        r.ranks = t * d;
        r.micro_batch = 4 / d;
        r.stage = z;
        r.steps = steps;
        r.extra += " --tp " + std::to_string(t);
        return r;
    };
    TrainerRun straight_run = grid("straight", 2, 2, 3, 10);
    straight_run.checkpoint_every = 5;
    straight_run.mem_report = true;  // its CSVs land in -o as for any run
    RunResult straight = straight_run.run();
    RunResult one_rank = grid("one_rank", 1, 1, 0, 10).run();
    EXPECT(straight.train_losses.size() == 10 && one_rank.train_losses.size() == 10, "main.log: %zu and %zu losses",
           straight.train_losses.size(), one_rank.train_losses.size());
    // model.bin is the full model in llm.c's order
    double model_gap = relative_error(read_model_params(straight.model_at(10)), read_model_params(one_rank.model_at(10)));
    EXPECT(model_gap <= 1e-5, "the t=2 run's model.bin differs from one rank's by %.3g", model_gap);

    // the first five steps, then copies of that directory resumed on other grids
    grid("first_half", 2, 2, 3, 5).run();
    auto resumed_on = [&](const std::string& copy, int t, int d, int z) {
        run_command("rm -rf " + dir + "/" + copy + " && cp -r " + dir + "/first_half " + dir + "/" + copy);
        TrainerRun r = grid(copy, t, d, z, 10);
        r.resume = true;
        return r.run();
    };
    RunResult same = resumed_on("same", 2, 2, 3);
    RunResult to_t1 = resumed_on("t1_d4_z1", 1, 4, 1);
    RunResult to_t4 = resumed_on("t4_d1_z0", 4, 1, 0);
    EXPECT(same.train_losses == straight.train_losses, "resume at the same grid: other losses");
    EXPECT(files_identical(same.model_at(10), straight.model_at(10)), "resume at the same grid is not bit-exact");
    for (int r = 0; r < 4; r++)
        EXPECT(files_identical(optim_file(checkpoint_dir(same.out, 10), r), optim_file(checkpoint_dir(straight.out, 10), r)),
               "optimizer file %d differs after a resume at the same grid", r);
    for (const RunResult* r : {&to_t1, &to_t4}) {
        EXPECT(r->output.find("resumed from") != std::string::npos, "%s did not resume:\n%s", r->command.c_str(),
               r->output.c_str());
        double loss_gap = r->train_losses.size() == 10 && !straight.train_losses.empty()
                              ? std::fabs(r->train_losses[9] - straight.train_losses[9]) / straight.train_losses[9]
                              : 1.0;
        double params_gap = relative_error(read_model_params(r->model_at(10)), read_model_params(straight.model_at(10)));
        EXPECT(loss_gap <= 1e-5 && params_gap <= 1e-5, "%s: step-10 loss %.3g, parameters %.3g from the uninterrupted run",
               r->command.c_str(), loss_gap, params_gap);
        printf("(t=2, d=2, z=3) -> %s: step-10 loss within %.2g, parameters %.2g\n", r->command.c_str(), loss_gap,
               params_gap);
    }

    // --consolidate of a tp checkpoint: its fp32 masters, i.e. the fp32 run's model.bin
    auto consolidated = [&](const std::string& ckpt) {
        TrainerRun c(base.trainer);
        c.extra = "--consolidate " + ckpt;
        c.run();
        return ckpt + "/model_fp32.bin";
    };
    std::string tp_fp32 = consolidated(checkpoint_dir(straight.out, 10));
    EXPECT(files_identical(tp_fp32, straight.model_at(10)), "the consolidated tp checkpoint is not its model.bin");
    // ... and the t=1 checkpoint of the same run (resumed at t=1) within float tolerance
    std::string t1_fp32 = consolidated(checkpoint_dir(to_t1.out, 10));
    double consolidate_gap = relative_error(read_model_params(tp_fp32), read_model_params(t1_fp32));
    EXPECT(consolidate_gap <= 1e-5, "consolidated t=2 and t=1 checkpoints differ by %.3g", consolidate_gap);
    // the manifest records the grid
    CheckpointManifest m;
    std::string why;
    EXPECT(read_manifest(checkpoint_dir(straight.out, 10), m, why) && m.id.world == 4 && m.id.tp == 2 && m.id.stage == 3,
           "manifest of the t=2 run: %s world %d tp %d", why.c_str(), m.id.world, m.id.tp);
    // the reports of a tp run: every rank of the grid its CSVs, rows for each of the 10 steps
    auto steps_in = [](const CsvRows& csv, int rank) {
        std::vector<int> seen;
        for (size_t i = 0; i < csv.rows.size(); i++)
            if ((int)csv.num(i, "rank") == rank) seen.push_back((int)csv.num(i, "step"));
        std::sort(seen.begin(), seen.end());
        seen.erase(std::unique(seen.begin(), seen.end()), seen.end());
        return seen.size() == 10 && seen.front() == 1 && seen.back() == 10;
    };
    for (int r = 0; r < 4; r++)
        EXPECT(steps_in(straight.mem_report(r), r) && steps_in(straight.comm_report(r), r),
               "rank %d of the t=2 run: its memory or traffic CSV lacks steps 1..10", r);
    return test_summary("tp_checkpoint");
}
