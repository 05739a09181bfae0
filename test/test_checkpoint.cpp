// Sharded checkpoints:
//   * re-slicing: optimizer shards written by N ranks at stage s load into any
//     N' ranks at stage s', element for element (unit test of the arithmetic);
//   * resume with the trainer: bit-exact at the same world size and stage; across
//     stages bit-exact too (at a fixed N the stages are bit-identical); across
//     world sizes within the 1e-5 of differently ordered sums; with a delayed
//     parameter update (--offload_delay_steps) bit-exact too;
//   * consolidation: one fp32 model file from the shards, equal to the model;
//   * integrity: resume verifies every file against the checkpoint's manifest
//     and falls back to the previous checkpoint, saying why (a missing, truncated
//     or altered file, a torn manifest); a killed save's staging directory is
//     never resumed; main.log keeps each step once across a resume;
//   * a fresh run refuses a directory holding another run's checkpoints unless
//     --overwrite 1, which deletes them;
//   * llm.c model files: version 3 and 5 round trips;
//   * bad input, each a one-line error and exit code 1: a checkpoint of another
//     model, no checkpoint that verifies, a world larger than a unit.
//
// usage: test_checkpoint <path to train_gpt2_zero_cpu>
#include <algorithm>
#include <cstdio>
#include <string>

#include "test/optim_file_util.h"
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
        read_optim_files(dir, layout, old_n, 1, PipelinePlan{}, plan, new_stage, r, 0, arrays);
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

// The checksum: the same digest however the bytes are fed, and another digest
// for every single flipped bit and for every length.
static void check_hash64() {
    std::vector<unsigned char> bytes(1000);
    Rng rng(3);
    for (unsigned char& b : bytes) b = (unsigned char)(rng.next_u32() & 0xff);
    const uint64_t whole = hash64(bytes.data(), bytes.size());
    for (size_t chunk : {1, 3, 7, 31, 32, 33, 100, 999}) {
        Hasher64 h;
        for (size_t at = 0; at < bytes.size(); at += chunk) h.update(bytes.data() + at, std::min(chunk, bytes.size() - at));
        EXPECT(h.digest() == whole, "fed in chunks of %zu: another digest", chunk);
    }
    std::vector<uint64_t> seen;
    for (size_t bit = 0; bit < 8 * 80; bit++) {  // every bit of the first 80 bytes: two stripes and a tail
        std::vector<unsigned char> b(bytes.begin(), bytes.begin() + 80);
        b[bit / 8] ^= (unsigned char)(1u << (bit % 8));
        seen.push_back(hash64(b.data(), b.size()));
    }
    for (size_t n = 0; n <= 80; n++) seen.push_back(hash64(bytes.data(), n));
    seen.push_back(hash64(bytes.data(), 80));  // the unflipped 80 bytes, listed twice on purpose: one duplicate
    std::sort(seen.begin(), seen.end());
    size_t dupes = seen.size() - (size_t)(std::unique(seen.begin(), seen.end()) - seen.begin());
    EXPECT(dupes == 1, "%zu colliding digests among single-bit flips and prefixes", dupes - 1);
}

// The manifest round-trips, and what is not a complete manifest of ours is refused.
static void check_manifest_text(const GPT2Config& cfg) {
    CheckpointManifest m;
    m.id.step = 12, m.id.shape = cfg, m.id.seed = 99, m.id.world = 3, m.id.stage = 2, m.id.precision = "bf16";
    m.id.tokens_per_step = 4096;
    m.files = {{"model.bin", 10, 0xabcdefull}, {"state.bin", 20, 1}};
    CheckpointManifest back;
    std::string why, text = m.to_text();
    EXPECT(parse_manifest(text, back, why) && back.to_text() == text, "manifest round trip: %s", why.c_str());
    const char* bad[] = {
        "",                                                   // empty
        "train_gpt2_zero checkpoint 1\nend\n",             // no identity
        "train_gpt2_zero checkpoint 1\nstep 1\n",           // no end line
    };
    for (const char* b : bad) EXPECT(!parse_manifest(b, back, why), "accepted a bad manifest: %s", b);
    auto replaced = [&](const std::string& from, const std::string& to) {
        std::string t = text;
        t.replace(t.find(from), from.size(), to);
        return t;
    };
    for (const std::string& t : {replaced("file model.bin", "file ../model.bin"), replaced("stage 2", "stage 7"), replaced("tp 1", "tp 0"), replaced("world 3\ntp 1", "world 3\ntp 2"),
                                 replaced("step 12", "step 12\nstep 13"), replaced("\nend\n", "\nend"),
                                 replaced("seed 99", "seed  99"), replaced("file state.bin 20", "file state.bin -20"),
                                 replaced("file state.bin", "file model.bin")})
        EXPECT(!parse_manifest(t, back, why), "accepted a bad manifest:\n%s", t.c_str());
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    ParamLayout layout(gpt2_config_from_descriptor(TINY));
    check_hash64();
    check_manifest_text(layout.cfg);

    // --- re-slicing, pure arithmetic
    for (int old_n : {1, 2, 3})
        for (int old_stage : {0, 1, 3})
            for (int new_n : {1, 2, 4})
                for (int new_stage : {0, 2, 3}) check_reslicing(layout, old_n, old_stage, new_n, new_stage);

    // --- the trainer
    std::string dir = "ckpt";
    fresh_dir(dir);
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

    // the delayed parameter update (--offload_delay_steps 2): a checkpoint holds
    // every update and the step after it starts the delay again, so a run
    // resumed from it continues the uninterrupted one (checkpointing at the same
    // steps) bit for bit; its first W + 1 steps are the undelayed run's
    auto delayed = [&](const std::string& out, int steps) {
        TrainerRun r = training(out, 2, 2, steps);
        r.offload_optimizer = true;
        r.checkpoint_every = 4;
        r.extra += " --offload_delay_steps 2";
        return r;
    };
    RunResult delayed_straight = delayed("delayed_straight", 10).run();
    delayed("delayed_resumed", 4).run();
    TrainerRun delayed_resuming = delayed("delayed_resumed", 10);
    delayed_resuming.resume = true;
    RunResult delayed_resumed = delayed_resuming.run();
    EXPECT(files_identical(delayed_straight.model_at(10), delayed_resumed.model_at(10)) &&
               delayed_straight.train_losses == delayed_resumed.train_losses,
           "resume with a delayed update is not bit-exact");
    for (int r = 0; r < 2; r++)
        EXPECT(files_identical(optim_file(checkpoint_dir(delayed_straight.out, 10), r),
                               optim_file(checkpoint_dir(delayed_resumed.out, 10), r)),
               "optimizer shard %d differs after resume with a delayed update", r);
    const std::vector<double>& dl = delayed_straight.train_losses;
    EXPECT(dl.size() == 10 && std::equal(dl.begin(), dl.begin() + 3, straight.train_losses.begin()) &&
               dl[3] != straight.train_losses[3],
           "the delayed update's first 3 losses should be the undelayed run's, and the 4th not");

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
    // another world size with the same tokens per step but another micro-batch
    // layout: 2 ranks x B=4 -> 1 rank x B=4 x 2 micro-steps (the data position is
    // kept in steps of the global stream, so the same tokens follow)
    training("n_to_accum", 1, 2, 5).run();
    TrainerRun to_accumulation = resuming("n_to_accum", 1, 1, 10);
    to_accumulation.total_batch = 4 * 32 * 2;
    RunResult n_to_accum = to_accumulation.run();
    double ea = relative_error(read_model_params(n_to_accum.model_at(10)), read_model_params(straight.model_at(10)));
    EXPECT(ea <= 1e-5 && n_to_accum.train_losses.size() == 10 &&
               max_relative_loss_error(n_to_accum.train_losses, straight.train_losses) <= 1e-5,
           "resume from 2 ranks into 1 rank with 2 micro-steps differs by %.3g (losses %zu)", ea,
           n_to_accum.train_losses.size());
    printf("resume: same N bit-exact; across stages bit-exact; 2 -> 4 ranks %.3g relative; 2 ranks -> 1 rank x 2 "
           "micro-steps %.3g\n", e, ea);

    // consolidation: the fp32 masters of the shards are the fp32 model
    TrainerRun consolidate(base.trainer);
    consolidate.extra = "--consolidate " + checkpoint_dir(n_to_n.out, 5);
    consolidate.run();
    EXPECT(files_identical(checkpoint_dir(n_to_n.out, 5) + "/model_fp32.bin", n_to_n.model_at(5)),
           "consolidated model differs from the model written by the run");

    // a directory without a manifest is not a checkpoint
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
    // --- integrity: resume verifies the manifest and falls back, saying why
    // (checkpoints of straight: steps 5 and 10; 10 is damaged in each case below)
    auto expect_fallback = [&](const TrainerRun& run, const char* why) {
        RunResult r = run.run();
        std::string skipped = "note: not resuming from " + checkpoint_dir(run.out, 10) + ": ";
        size_t at = r.output.find(skipped);
        EXPECT(at != std::string::npos && r.output.find(why, at) != std::string::npos &&
                   r.output.find("resumed from " + checkpoint_dir(run.out, 5) + " (step 5)") != std::string::npos,
               "'%s': expected a fall back to step 5 because '%s', got:\n%s", r.command.c_str(), why, r.output.c_str());
        return r;
    };
    // a missing rank file
    TrainerRun missing = resuming_copy("missing");
    run_command("rm " + optim_file(checkpoint_dir(missing.out, 10), 1));
    expect_fallback(missing, "optim_rank00001.bin is missing");
    // a truncated file
    TrainerRun truncated = resuming_copy("truncated");
    run_command("truncate -s 5000 " + optim_file(checkpoint_dir(truncated.out, 10), 0));
    expect_fallback(truncated, "optim_rank00000.bin has 5000 bytes");
    // bytes flipped inside an optimizer file: same size, other values; the
    // resumed run equals the straight run's steps after 5 bit for bit
    TrainerRun flipped = resuming_copy("flipped");
    flipped.steps = 10;
    run_command("printf 'XXXX' | dd of=" + optim_file(checkpoint_dir(flipped.out, 10), 1) +
                " bs=1 seek=4000 conv=notrunc 2>/dev/null");
    RunResult from_5 = expect_fallback(flipped, "optim_rank00001.bin does not match its checksum");
    EXPECT(files_identical(from_5.model_at(10), straight.model_at(10)), "the fall back to step 5 is not bit-exact");
    // ... and main.log holds each step once, as the straight run's does
    EXPECT(from_5.train_losses == straight.train_losses, "main.log after resuming at step 5 of 10: %zu losses, "
           "expected the straight run's %zu", from_5.train_losses.size(), straight.train_losses.size());
    // a model.bin with a flipped magic (resume reads only the masters, but the
    // checkpoint is damaged: a later export would fail)
    TrainerRun bad_model = resuming_copy("bad_model");
    run_command("printf 'Q' | dd of=" + checkpoint_model(bad_model.out, 10) + " bs=1 seek=0 conv=notrunc 2>/dev/null");
    expect_fallback(bad_model, "model.bin does not match its checksum");
    // a torn manifest
    TrainerRun torn = resuming_copy("torn");
    run_command("truncate -s 40 " + checkpoint_dir(torn.out, 10) + "/MANIFEST");
    expect_fallback(torn, "manifest");
    // a save killed before its rename leaves checkpoint_<s>.tmp (whatever it
    // holds, even a state file and a half-written marker): never resumed, and cleared
    TrainerRun killed_save = resuming_copy("killed_save");
    std::string staging = checkpoint_staging_dir(killed_save.out, 11);
    make_dir(staging);
    run_command("cp " + checkpoint_dir(killed_save.out, 10) + "/state.bin " + staging + " && echo done > " + staging +
                "/DONE.tmp");
    RunResult after_kill = killed_save.run();
    EXPECT(after_kill.output.find("resumed from " + checkpoint_dir(killed_save.out, 10) + " (step 10)") !=
                   std::string::npos && !file_exists(staging),
           "a staging directory was not ignored and cleared:\n%s", after_kill.output.c_str());
    // every checkpoint damaged: an error, not a silent fresh start
    TrainerRun all_bad = resuming_copy("all_bad");
    run_command("rm " + checkpoint_dir(all_bad.out, 10) + "/MANIFEST " + checkpoint_dir(all_bad.out, 5) + "/MANIFEST");
    expect_error(all_bad, "no checkpoint in");

    // the manifest names the run: its shape, seed, world, stage and precision
    CheckpointManifest manifest;
    std::string why;
    EXPECT(verify_checkpoint(checkpoint_dir(straight.out, 10), 10, manifest, why), "straight/10: %s", why.c_str());
    EXPECT(same_shape(manifest.id.shape, layout.cfg) && manifest.id.seed == 1337 && manifest.id.world == 2 &&
               manifest.id.stage == 2 && manifest.id.precision == "fp32" && manifest.id.tokens_per_step == 4 * 32 * 2 &&
               manifest.files.size() == 4,
           "manifest identity: %s", manifest.to_text().c_str());

    // --- a directory holding another run's checkpoints is not written into
    // without --overwrite 1, which deletes them (so -y 1 cannot pick up the
    // older run's later steps)
    TrainerRun rewrite = base;
    rewrite.out = dir + "/rewrite";
    run_command("cp -r " + straight.out + " " + rewrite.out);
    rewrite.steps = 3;
    rewrite.extra += " --seed 5";
    expect_error(rewrite, "already holds checkpoints");
    EXPECT(latest_checkpoint(rewrite.out) == 10, "a refused run touched the checkpoints");
    rewrite.extra += " --overwrite 1";
    run_command("echo mine > " + rewrite.out + "/checkpoint_notes.txt");  // not a checkpoint: kept
    rewrite.run();
    EXPECT(file_exists(rewrite.out + "/checkpoint_notes.txt"), "--overwrite 1 deleted a file that is no checkpoint");
    EXPECT(checkpoint_steps(rewrite.out) == std::vector<int>{3}, "after --overwrite 1: checkpoints %zu",
           checkpoint_steps(rewrite.out).size());
    EXPECT(read_main_log(rewrite.out + "/main.log", "trl").size() == 3, "main.log of the overwriting run");

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
