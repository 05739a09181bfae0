// Sharded checkpoints:
//   * re-slicing: optimizer shards written by N ranks at stage s load into any
//     N' ranks at stage s', element for element (unit test of the arithmetic);
//   * resume with the trainer: bit-exact at the same world size and stage; across
//     stages bit-exact too (at a fixed N the stages are bit-identical); across
//     world sizes within the 1e-5 of differently ordered sums;
//   * consolidation: one fp32 model file from the shards, equal to the model;
//   * an incomplete checkpoint (no DONE marker) is ignored;
//   * llm.c model files: version 3 and 5 round trips;
//   * bad input, each a one-line error and exit code 1: a checkpoint of another
//     model, a missing rank file, a truncated file, a world larger than a unit.
//
// usage: test_checkpoint <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/trainer_run.h"

// the value element i of unit u has in array a, in a recognisable pattern
static float pattern(int u, size_t i, int a) { return (float)(u * 100000 + (int)i) + 0.25f * a; }

static void check_reslicing(const ParamLayout& layout, int old_n, int old_stage, int new_n, int new_stage) {
    std::string dir = "reslice";
    make_dir(dir);
    ShardPlan old_plan(layout.unit_specs(), old_n, SHARD_ALIGN);
    for (int r = 0; r < old_n; r++) {
        size_t n = old_stage == 0 ? old_plan.full_numel : old_plan.shard_numel;
        std::vector<float> arr[3];
        for (int a = 0; a < 3; a++) arr[a].assign(n, -1.0f);
        for (int u = 0; u < old_plan.num_units(); u++)
            for (size_t i = 0; i < old_plan.padded[u]; i++) {
                bool mine = old_stage == 0 || old_plan.owner_of(old_plan.full_offset[u] + i) == r;
                if (!mine) continue;
                for (int a = 0; a < 3; a++)
                    arr[a][optimizer_index(old_plan, old_stage, r, u, i)] =
                        i < old_plan.units[u].numel ? pattern(u, i, a) : 0.0f;
            }
        const float* arrays[3] = {arr[0].data(), arr[1].data(), arr[2].data()};
        write_optim_file(dir, make_header(CKPT_OPTIM_MAGIC, layout.cfg, 1, old_n, old_stage, r, old_plan.shard_numel),
                         old_plan, old_stage, arrays);
    }
    ShardPlan plan(layout.unit_specs(), new_n, SHARD_ALIGN);
    for (int r = 0; r < new_n; r++) {
        size_t n = new_stage == 0 ? plan.full_numel : plan.shard_numel;
        std::vector<float> arr[3];
        for (int a = 0; a < 3; a++) arr[a].assign(n, -7.0f);
        float* arrays[3] = {arr[0].data(), arr[1].data(), arr[2].data()};
        read_optim_files(dir, layout, old_n, plan, new_stage, r, arrays);
        size_t bad = 0, checked = 0;
        for (int u = 0; u < plan.num_units(); u++)
            for (size_t i = 0; i < plan.units[u].numel; i++) {
                bool mine = new_stage == 0 || plan.owner_of(plan.full_offset[u] + i) == r;
                if (!mine) continue;
                for (int a = 0; a < 3; a++, checked++)
                    bad += arr[a][optimizer_index(plan, new_stage, r, u, i)] != pattern(u, i, a);
            }
        EXPECT(bad == 0 && checked > 0, "N=%d stage %d -> N=%d stage %d, rank %d: %zu of %zu values wrong", old_n,
               old_stage, new_n, new_stage, r, bad, checked);
    }
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    ParamLayout layout(gpt2_config_from_descriptor(TINY));

    // --- re-slicing, pure arithmetic
    for (int old_n : {1, 2, 3})
        for (int old_stage : {0, 1, 3})
            for (int new_n : {1, 2, 4})
                for (int new_stage : {0, 2, 3}) check_reslicing(layout, old_n, old_stage, new_n, new_stage);

    // --- the trainer
    std::string dir = "ckpt";
    run_command("rm -rf " + dir);
    make_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 30000, 5);
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.micro_batch = 4;
    // constant lr after warmup: a run stopped at step 5 follows the same schedule as one going to 10
    base.extra = "-l 2e-3 -u 2 -c 0.1 -f 1";
    // stage z on n ranks for `steps` steps, into ckpt/<out>
    auto training = [&](const std::string& out, int z, int n, int steps) {
        TrainerRun r = base;
        r.out = dir + "/" + out;
        r.stage = z;
        r.ranks = n;
        r.steps = steps;
        return r;
    };
    // the same, from the latest complete checkpoint in ckpt/<out>
    auto resuming = [&](const std::string& out, int z, int n, int steps) {
        TrainerRun r = training(out, z, n, steps);
        r.resume = true;
        return r;
    };

    // same N and stage: resume reproduces the uninterrupted run bit for bit
    TrainerRun straight_run = training("straight", 2, 2, 10);
    straight_run.checkpoint_every = 5;
    RunResult straight = straight_run.run();
    training("resumed", 2, 2, 5).run();
    RunResult resumed = resuming("resumed", 2, 2, 10).run();
    EXPECT(files_identical(straight.model_at(10), resumed.model_at(10)), "resume at the same N and stage is not bit-exact");
    for (int r = 0; r < 2; r++)
        EXPECT(files_identical(optim_file(checkpoint_dir(straight.out, 10), r),
                               optim_file(checkpoint_dir(resumed.out, 10), r)),
               "optimizer shard %d differs after resume", r);
    EXPECT(straight.train_losses == resumed.train_losses, "losses differ after resume");

    // another stage at the same N: still bit-exact
    training("stage_to_stage", 3, 2, 5).run();
    RunResult stage_to_stage = resuming("stage_to_stage", 0, 2, 10).run();
    EXPECT(files_identical(straight.model_at(10), stage_to_stage.model_at(10)),
           "resume from stage 3 into stage 0 is not bit-exact");

    // another world size: the state re-slices; later steps sum in another order
    training("n_to_n", 1, 2, 5).run();
    TrainerRun to_4_ranks = resuming("n_to_n", 3, 4, 10);
    to_4_ranks.micro_batch = 2;  // the same global batch
    RunResult n_to_n = to_4_ranks.run();
    double e = relative_error(read_model_params(n_to_n.model_at(10)), read_model_params(straight.model_at(10)));
    EXPECT(e <= 1e-5, "resume from 2 ranks into 4 differs by %.3g", e);
    EXPECT(max_relative_loss_error(n_to_n.train_losses, straight.train_losses) <= 1e-5, "losses after resume across N");
    printf("resume: same N bit-exact; across stages bit-exact; 2 -> 4 ranks %.3g relative\n", e);

    // consolidation: the fp32 masters of the shards are the fp32 model
    TrainerRun consolidate(base.trainer);
    consolidate.extra = "--consolidate " + checkpoint_dir(n_to_n.out, 5);
    consolidate.run();
    EXPECT(files_identical(checkpoint_dir(n_to_n.out, 5) + "/model_fp32.bin", n_to_n.model_at(5)),
           "consolidated model differs from the model written by the run");

    // an incomplete checkpoint is not resumed from
    make_dir(checkpoint_dir(straight.out, 7));
    run_command("cp " + straight.model_at(5) + " " + checkpoint_dir(straight.out, 7));
    EXPECT(latest_checkpoint(straight.out) == 10, "latest complete checkpoint: %d", latest_checkpoint(straight.out));
    EXPECT(latest_checkpoint(dir + "/nothing_here") == -1, "no directory, no checkpoint");

    // llm.c model files: a bf16 run writes version 5; both versions load back
    TrainerRun bf16_run = training("bf16", 1, 2, 2);
    bf16_run.precision = "bf16";
    RunResult bf16 = bf16_run.run();
    ModelFile v5(bf16.model_at(2));
    EXPECT(v5.version == MODEL_VERSION_BF16, "a bf16 run wrote version %d", v5.version);
    TrainerRun from_v5 = base;  // the trainer's default stage and ranks
    from_v5.model = bf16.model_at(2);
    from_v5.steps = 1;
    from_v5.precision = "bf16";
    from_v5.out = dir + "/from_v5";
    from_v5.run();
    // a model loaded and saved unchanged (no update: lr and weight decay 0) is the same file
    auto round_trip = [&](const std::string& out, const std::string& model, const std::string& precision) {
        TrainerRun r = base;
        r.out = dir + "/" + out;
        r.model = model;
        r.precision = precision;
        r.stage = 0;
        r.steps = 1;
        r.extra += " -l 0 -c 0";
        return r.run().model_at(1);
    };
    EXPECT(files_identical(round_trip("v3", straight.model_at(10), ""), straight.model_at(10)),
           "a version 3 model does not round-trip");
    EXPECT(files_identical(round_trip("v5", bf16.model_at(2), "bf16"), bf16.model_at(2)),
           "a version 5 model does not round-trip");

    // --- bad input: one line, exit code 1
    auto expect_error = [&](const TrainerRun& run, const char* needle) {
        RunResult r = run.try_run();
        bool one_line = r.output.find("error: ") != std::string::npos &&
                        r.output.find('\n', r.output.find("error: ")) == r.output.size() - 1;
        EXPECT(r.status == 1 && r.output.find(needle) != std::string::npos && one_line,
               "'%s': expected a one-line error containing '%s', got status %d:\n%s", r.command.c_str(), needle,
               r.status, r.output.c_str());
    };
    auto resuming_copy = [&](const std::string& copy) {  // a copy of the straight run's directory, resumed
        run_command("cp -r " + straight.out + " " + dir + "/" + copy);
        TrainerRun r = base;
        r.out = dir + "/" + copy;
        r.ranks = 2;
        r.steps = 12;
        r.resume = true;
        return r;
    };
    // another model
    TrainerRun other_model = base;
    other_model.model = "L=3,H=4,C=64,V=512,T=32";
    other_model.steps = 10;
    other_model.resume = true;
    other_model.out = straight.out;
    expect_error(other_model, "another model");
    // a missing rank file
    TrainerRun missing = resuming_copy("missing");
    run_command("rm " + optim_file(checkpoint_dir(missing.out, 10), 1));
    expect_error(missing, "is missing");
    // a truncated file
    TrainerRun truncated = resuming_copy("truncated");
    run_command("truncate -s 5000 " + optim_file(checkpoint_dir(truncated.out, 10), 0));
    expect_error(truncated, "truncated");
    // a world larger than the smallest unit (the final layernorm: 128 elements)
    TrainerRun too_many = base;
    too_many.steps = 1;
    too_many.micro_batch = 1;
    too_many.ranks = 200;
    expect_error(too_many, "larger than unit");
    // a truncated model file, and a file that is not a model
    run_command("cp " + straight.model_at(10) + " " + dir + "/short.bin && truncate -s 2000 " + dir + "/short.bin");
    TrainerRun not_a_model = base;
    not_a_model.steps = 1;
    not_a_model.model = dir + "/short.bin";
    expect_error(not_a_model, "truncated");
    not_a_model.model = dir + "/train.bin";
    expect_error(not_a_model, "not an llm.c model file");
    return test_summary("checkpoint");
}
