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

#include "test/trainer_harness.h"
#include "zero/engine/checkpoint.h"

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
    if (argc < 2) {
        fprintf(stderr, "usage: %s <train_gpt2_zero_cpu>\n", argv[0]);
        return 2;
    }
    std::string trainer = argv[1];
    const char* shape = "L=2,H=4,C=64,V=512,T=32";
    ParamLayout layout(gpt2_config_from_descriptor(shape));

    // --- re-slicing, pure arithmetic
    for (int old_n : {1, 2, 3})
        for (int old_stage : {0, 1, 3})
            for (int new_n : {1, 2, 4})
                for (int new_stage : {0, 2, 3}) check_reslicing(layout, old_n, old_stage, new_n, new_stage);

    // --- the trainer
    std::string dir = "ckpt";
    run_command("rm -rf " + dir);
    make_dir(dir);
    write_markov_shard(dir + "/train.bin", 512, 30000, 5);
    // constant lr after warmup: a run stopped at step 5 follows the same schedule as one going to 10
    std::string common = trainer + " -e " + shape + " -t 32 -b 4 -l 2e-3 -u 2 -c 0.1 -v 0 -s 0 -f 1 -i " + dir +
                         "/train.bin";
    auto run = [&](const std::string& out, const std::string& flags) {
        CommandResult r = run_command(common + " -o " + dir + "/" + out + " " + flags);
        EXPECT(r.status == 0, "%s %s failed:\n%s", out.c_str(), flags.c_str(), r.output.c_str());
        return r;
    };
    auto model = [&](const std::string& out, int step) { return checkpoint_dir(dir + "/" + out, step) + "/model.bin"; };
    auto losses = [&](const std::string& out) { return read_train_losses(dir + "/" + out + "/main.log"); };

    // same N and stage: resume reproduces the uninterrupted run bit for bit
    run("straight", "-z 2 --ranks 2 -x 10 -n 5");
    run("resumed", "-z 2 --ranks 2 -x 5");
    run("resumed", "-z 2 --ranks 2 -x 10 -y 1");
    EXPECT(files_identical(model("straight", 10), model("resumed", 10)), "resume at the same N and stage is not bit-exact");
    for (int r = 0; r < 2; r++)
        EXPECT(files_identical(optim_file(checkpoint_dir(dir + "/straight", 10), r),
                               optim_file(checkpoint_dir(dir + "/resumed", 10), r)),
               "optimizer shard %d differs after resume", r);
    EXPECT(losses("straight") == losses("resumed"), "losses differ after resume");

    // another stage at the same N: still bit-exact
    run("stage_to_stage", "-z 3 --ranks 2 -x 5");
    run("stage_to_stage", "-z 0 --ranks 2 -x 10 -y 1");
    EXPECT(files_identical(model("straight", 10), model("stage_to_stage", 10)),
           "resume from stage 3 into stage 0 is not bit-exact");

    // another world size: the state re-slices; later steps sum in another order
    run("n_to_n", "-z 1 --ranks 2 -x 5");
    run("n_to_n", "-z 3 --ranks 4 -b 2 -x 10 -y 1");
    double e = relative_error(read_model_params(model("n_to_n", 10)), read_model_params(model("straight", 10)));
    EXPECT(e <= 1e-5, "resume from 2 ranks into 4 differs by %.3g", e);
    EXPECT(max_relative_loss_error(losses("n_to_n"), losses("straight")) <= 1e-5, "losses after resume across N");
    printf("resume: same N bit-exact; across stages bit-exact; 2 -> 4 ranks %.3g relative\n", e);

    // consolidation: the fp32 masters of the shards are the fp32 model
    CommandResult c = run_command(trainer + " --consolidate " + checkpoint_dir(dir + "/n_to_n", 5));
    EXPECT(c.status == 0, "consolidate failed:\n%s", c.output.c_str());
    EXPECT(files_identical(checkpoint_dir(dir + "/n_to_n", 5) + "/model_fp32.bin", model("n_to_n", 5)),
           "consolidated model differs from the model written by the run");

    // an incomplete checkpoint is not resumed from
    make_dir(checkpoint_dir(dir + "/straight", 7));
    run_command("cp " + model("straight", 5) + " " + checkpoint_dir(dir + "/straight", 7));
    EXPECT(latest_checkpoint(dir + "/straight") == 10, "latest complete checkpoint: %d",
           latest_checkpoint(dir + "/straight"));
    EXPECT(latest_checkpoint(dir + "/nothing_here") == -1, "no directory, no checkpoint");

    // llm.c model files: a bf16 run writes version 5; both versions load back
    run("bf16", "-z 1 --ranks 2 -x 2 -p bf16");
    ModelFile v5(model("bf16", 2));
    EXPECT(v5.version == MODEL_VERSION_BF16, "a bf16 run wrote version %d", v5.version);
    CommandResult from_v5 = run_command(common + " -e " + model("bf16", 2) + " -x 1 -p bf16 -o " + dir + "/from_v5");
    EXPECT(from_v5.status == 0, "starting from a version 5 file failed:\n%s", from_v5.output.c_str());
    // version 3 round trip: a model loaded and saved unchanged is the same file
    run("v3", "-z 0 -x 1 -e " + model("straight", 10) + " -l 0 -c 0");
    EXPECT(files_identical(model("v3", 1), model("straight", 10)), "a version 3 model does not round-trip");
    run("v5", "-z 0 -x 1 -p bf16 -e " + model("bf16", 2) + " -l 0 -c 0");
    EXPECT(files_identical(model("v5", 1), model("bf16", 2)), "a version 5 model does not round-trip");

    // --- bad input: one line, exit code 1
    auto expect_error = [&](const std::string& flags, const char* needle) {
        CommandResult r = run_command(common + " " + flags);
        bool one_line = r.output.find("error: ") != std::string::npos &&
                        r.output.find('\n', r.output.find("error: ")) == r.output.size() - 1;
        EXPECT(r.status == 1 && r.output.find(needle) != std::string::npos && one_line,
               "'%s': expected a one-line error containing '%s', got status %d:\n%s", flags.c_str(), needle, r.status,
               r.output.c_str());
    };
    // another model
    expect_error("-e L=3,H=4,C=64,V=512,T=32 -x 10 -y 1 -o " + dir + "/straight", "another model");
    // a missing rank file
    run_command("cp -r " + dir + "/straight " + dir + "/missing");
    run_command("rm " + optim_file(checkpoint_dir(dir + "/missing", 10), 1));
    expect_error("-x 12 -y 1 --ranks 2 -o " + dir + "/missing", "is missing");
    // a truncated file
    run_command("cp -r " + dir + "/straight " + dir + "/truncated");
    run_command("truncate -s 5000 " + optim_file(checkpoint_dir(dir + "/truncated", 10), 0));
    expect_error("-x 12 -y 1 --ranks 2 -o " + dir + "/truncated", "truncated");
    // a world larger than the smallest unit (the final layernorm: 128 elements)
    expect_error("-x 1 -b 1 --ranks 200", "larger than unit");
    // a truncated model file, and a file that is not a model
    run_command("cp " + model("straight", 10) + " " + dir + "/short.bin && truncate -s 2000 " + dir + "/short.bin");
    expect_error("-x 1 -e " + dir + "/short.bin", "truncated");
    expect_error("-x 1 -e " + dir + "/train.bin", "not an llm.c model file");
    return test_summary("checkpoint");
}
