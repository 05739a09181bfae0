// The trainer's front door, end to end: absurd input is one "error:" line and
// exit status 1 before anything runs, and a DeepSpeed config written for
// DeepSpeed runs as DeepSpeed would run it.
//   * non-finite hyperparameters (-l inf, -l nan, a float flag beyond float's range);
//   * a directory where a file belongs (-i, -e, --tokenizer);
//   * a stray argument that is not a flag;
//   * two models to start from (-e and --from_hf);
//   * --offload_grad_accum: a value other than host or device, and device
//     without optimizer offload;
//   * --offload_delay_steps: negative, without optimizer offload, with
//     parameter offload;
//   * --attention: a value other than own or cudnn, and cudnn in a build
//     without cuDNN (the CPU build);
//   * --predict on a missing or malformed profile, on no nodes, on several
//     nodes of a profile without a network, with a tensor-parallel degree the
//     cluster's devices do not divide; --calibrate into a profile from
//     specifications;
//   * a run (not a prediction) of more than 4096 emulated ranks, or of a
//     vocabulary beyond the uint16 tokens of llm.c's data files;
//   * a stage-3 config with train_batch_size but no micro-batch, on 4 emulated
//     ranks: micro-batch train_batch_size / 4, no accumulation, stage 3, and the
//     header says so; a misspelt key is refused naming the right one.
//
// usage: test_cli_errors <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/trainer_run.h"

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "cli_errors";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 3);
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.micro_batch = 2;
    base.steps = 2;

    auto expect_error = [&](const std::string& extra, const char* needle) {
        TrainerRun run = base;
        run.extra = extra;
        RunResult r = run.try_run();
        size_t at = r.output.find("error: ");
        bool one_line = at != std::string::npos && r.output.find('\n', at) == r.output.size() - 1 &&
                        r.output.find("step ") == std::string::npos;
        EXPECT(r.status == 1 && r.output.find(needle) != std::string::npos && one_line,
               "'%s': expected one error line containing '%s' and no training, got status %d:\n%s", r.command.c_str(),
               needle, r.status, r.output.c_str());
    };
    expect_error("-l inf", "flag -l wants a finite number, got 'inf'");
    expect_error("-l nan", "flag -l wants a finite number, got 'nan'");
    expect_error("--grad_clip -inf", "flag --grad_clip wants a finite number");
    expect_error("--adam_eps 1e300", "flag --adam_eps wants a finite number, got '1e300'");
    expect_error("--device_memory inf", "flag --device_memory wants a finite number");
    expect_error("--host_memory 100000", "--host_memory plans for another machine: give its device's memory too");
    expect_error("--device_memory 80000 --host_memory -1", "--host_memory must be >= 0 MiB");
    expect_error("-i " + dir, "cli_errors is a directory, not a file");
    expect_error("-e " + dir + "/", "cli_errors/ is a directory, not a file");
    expect_error("extra", "unexpected argument 'extra'");
    expect_error("-x 3 extra -v 1", "unexpected argument 'extra'");
    expect_error("--from_hf " + dir, "both name the model to start from: give one");
    expect_error("-z 2 --offload_optimizer cpu --offload_grad_accum gpu",
                 "--offload_grad_accum must be host or device (got 'gpu')");
    expect_error("-z 2 --offload_grad_accum device", "--offload_grad_accum device needs --offload_optimizer cpu");
    expect_error("-z 2 --offload_optimizer cpu --offload_delay_steps -1", "--offload_delay_steps must be 0 or more");
    expect_error("-z 2 --offload_delay_steps 2", "--offload_delay_steps needs --offload_optimizer cpu");
    expect_error("-z 3 --offload_optimizer cpu --offload_param cpu --offload_delay_steps 2",
                 "--offload_delay_steps cannot be used with --offload_param cpu");
    expect_error("--attention flash", "--attention must be own or cudnn (got 'flash')");
    expect_error("--attention cudnn", "--attention cudnn: this build has no cuDNN");
    std::string trainer = trainer_from_args(argc, argv);
    const std::string spec = trainer.substr(0, trainer.rfind('/') + 1) + "zero/perf/profiles/v100_dgx2.json";
    expect_error("--predict " + dir + "/none.json", "none.json");
    FILE* bad = open_file(dir + "/bad_profile.json", "wb");
    fputs(R"({"device": {"peak_tflops": "fast"}})", bad);
    fclose(bad);
    expect_error("--predict " + dir + "/bad_profile.json", "peak_tflops must be a number");
    expect_error("--predict " + spec + " --nodes 0", "--nodes must be at least 1 (got 0)");
    const std::string one_h100 = spec.substr(0, spec.rfind('/') + 1) + "h100.json";
    expect_error("--predict " + one_h100 + " --nodes 2", "h100.json has no network between nodes (network.node_gbs)");
    // what only a real run needs: its ranks as threads, and tokens llm.c's uint16 files can hold
    expect_error("--ranks 5000", "--ranks must be between 1 and 4096 (got 5000)");
    expect_error("-e L=2,H=4,C=64,V=70000,T=64", "vocab 70000 does not fit the uint16 tokens of llm.c data files");
    expect_error("--predict " + spec + " --tp 32", "world size 16 is not a multiple of --tp 32");
    std::string copy = dir + "/spec_copy.json";
    run_command("cp " + spec + " " + copy + " && cp " + spec.substr(0, spec.rfind('/') + 1) + "v100_gemm.csv " + dir);
    expect_error("--calibrate " + copy, "is a profile from specifications: calibrate into another file");

    // DeepSpeed's batch rule on the homework's kind of config
    FILE* f = open_file(dir + "/ds_stage3.json", "wb");
    fputs(R"({"train_batch_size": 4, "zero_optimization": {"stage": 3, "overlap_comm": true},
              "optimizer": {"type": "AdamW", "params": {"lr": 1e-3}}})", f);
    fclose(f);
    TrainerRun ds = base;
    ds.ranks = 4;
    ds.extra = "--deepspeed_config " + dir + "/ds_stage3.json";
    RunResult r = ds.run();
    for (const char* part : {"training 2 steps from step 0: 128 tokens per step (4 rank(s) x B=1 x T=32 x 1 micro-step(s))",
                             "--micro_batch 1", "--total_batch 128", "--zero_stage 3", "--adam_beta2 0.999",
                             "note: no effect here (each tunes what this trainer does one fixed way; "
                             "zero/run/deepspeed_keys.cpp says how): zero_optimization.overlap_comm\n"})
        EXPECT(r.output.find(part) != std::string::npos, "the DeepSpeed run's output lacks '%s':\n%s", part,
               r.output.c_str());
    f = open_file(dir + "/ds_typo.json", "wb");
    fputs(R"({"train_batch_size": 4, "zero_optimization": {"stgae": 3}})", f);
    fclose(f);
    expect_error("--ranks 4 --deepspeed_config " + dir + "/ds_typo.json",
                 "zero_optimization.stgae (did you mean zero_optimization.stage?): a key this trainer does not read");
    return test_summary("cli_errors");
}
