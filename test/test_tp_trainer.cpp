// --tp through the trainer binary: a t x d grid of emulated ranks trains to the
// same losses as one rank on the same global batch (the in-process test,
// test_tensor_parallel.cpp, checks parameters, bytes and memory), also from an
// llm.c model file, samples with sequence parallelism's padded prompts equal
// those without, and what it cannot do is refused with one line.
//
// usage: test_tp_trainer <path to train_gpt2_zero_cpu>
#include <cmath>
#include <cstdio>
#include <string>

#include "test/trainer_run.h"

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    std::string dir = "tp_trainer";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 3);
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.steps = 6;
    base.extra = "--seed 7";

    // one rank, 4 sequences per step
    TrainerRun one = base;
    one.micro_batch = 4;
    RunResult ref = one.run();
    EXPECT(ref.steps.size() == 6, "one rank: %zu step lines", ref.steps.size());

    struct Grid {
        int ranks, tp, stage, micro_batch, recompute, sp;
    };
    for (Grid g : {Grid{2, 2, 1, 4, 0, 0}, Grid{4, 2, 3, 2, 0, 0}, Grid{4, 4, 2, 4, 2, 0}, Grid{8, 4, 3, 2, 1, 0},
                   Grid{4, 2, 3, 2, 0, 1}, Grid{4, 4, 1, 4, 2, 1}}) {
        TrainerRun run = base;
        run.ranks = g.ranks;
        run.stage = g.stage;
        run.micro_batch = g.micro_batch;
        run.recompute = g.recompute;
        run.mem_report = true;
        run.extra += " --tp " + std::to_string(g.tp) + " --sp " + std::to_string(g.sp);
        RunResult r = run.run();
        EXPECT(r.steps.size() == ref.steps.size(), "%s: %zu step lines", r.command.c_str(), r.steps.size());
        double worst = 0;
        for (size_t i = 0; i < r.steps.size() && i < ref.steps.size(); i++)
            worst = std::max(worst, std::fabs(r.steps[i].loss - ref.steps[i].loss) / ref.steps[i].loss);
        // the step lines print 6 decimals: ~1e-7 of a loss of about 6
        EXPECT(worst <= 1e-5, "%s: losses differ from one rank's by %.3g", r.command.c_str(), worst);
        EXPECT(r.output.find("tensor parallel: " + std::to_string(g.tp) + " x " +
                             std::to_string(g.ranks / g.tp) + " grid") != std::string::npos &&
                   r.output.find("tensor-parallel sent") != std::string::npos,
               "%s: no grid line or tensor-parallel traffic in the report:\n%s", r.command.c_str(), r.output.c_str());
        printf("--ranks %d --tp %d --sp %d -z %d -r %d: losses within %.2g of one rank\n", g.ranks, g.tp, g.sp,
               g.stage, g.recompute, worst);
    }

    // samples: with sequence parallelism the prompt is padded to a multiple of t,
    // which causal attention keeps out of the logits read; the tokens drawn are
    // those of the same grid without it (whose forward has the same bits), and
    // those of one rank (the row's logits put together from the t ranks' slices)
    auto sample_of = [&](int tp, int sp) {
        TrainerRun run = base;
        run.ranks = tp;
        run.micro_batch = 2;
        run.steps = 2;
        run.sample_every = 1;
        run.extra += " --tp " + std::to_string(tp) + " -g 13 --sp " + std::to_string(sp);
        RunResult r = run.run();
        size_t at = r.output.find("sample: ");
        return at == std::string::npos ? std::string() : r.output.substr(at, r.output.find('\n', at) - at);
    };
    std::string plain = sample_of(4, 0), sequence_parallel = sample_of(4, 1), one_rank = sample_of(1, 0);
    EXPECT(!plain.empty() && plain == sequence_parallel, "samples differ:\n  %s\n  %s", plain.c_str(),
           sequence_parallel.c_str());
    EXPECT(!one_rank.empty() && plain == one_rank, "--tp 4 samples differ from one rank's:\n  %s\n  %s",
           plain.c_str(), one_rank.c_str());

    // starting from a model file: each tensor rank cuts its part from the full tensors
    TrainerRun writer = base;
    writer.micro_batch = 4;
    writer.steps = 2;
    writer.out = dir + "/writer";
    writer.run();
    std::string model_file = checkpoint_model(writer.out, 2);
    TrainerRun from_file = base;
    from_file.model = model_file;
    from_file.micro_batch = 4;
    RunResult file_ref = from_file.run();
    from_file.ranks = 4;
    from_file.micro_batch = 2;
    from_file.extra += " --tp 2";
    RunResult file_tp = from_file.run();
    double file_gap = file_ref.steps.empty() || file_tp.steps.size() != file_ref.steps.size() ? 1.0 : 0.0;
    for (size_t i = 0; i < file_tp.steps.size() && i < file_ref.steps.size(); i++)
        file_gap = std::max(file_gap, std::fabs(file_tp.steps[i].loss - file_ref.steps[i].loss) / file_ref.steps[i].loss);
    // (the file's model is two steps on: its first loss is below a fresh model's)
    EXPECT(file_gap <= 1e-5 && !file_ref.steps.empty() && file_ref.steps[0].loss < ref.steps[0].loss - 0.01,
           "from %s: --tp 2 losses differ from one rank's by %.3g (first loss %.4f, fresh %.4f)",
           model_file.c_str(), file_gap, file_ref.steps.empty() ? 0.0 : file_ref.steps[0].loss, ref.steps[0].loss);

    // bad input: one line each, exit status 1
    auto expect_error = [&](const std::string& extra, int ranks, const char* needle) {
        expect_one_line_error(base, extra, ranks, needle);
    };
    expect_error("--tp 3", 3, "does not divide the 4 attention heads");
    expect_error("--tp 2", 3, "world size 3 is not a multiple of --tp 2");
    expect_error("--tp 0", 2, "--tp must be at least 1");
    expect_error("--sp 1", 2, "--sp 1 (sequence parallelism) needs --tp > 1");
    expect_error("--tp 2 --sp 1 -t 31", 2, "to be a multiple of --tp 2");
    expect_error("--tp 4 -r 2 -t 31", 4, "(ZeRO-R Pa): B*T = 2*31 must be a multiple of 4");
    return test_summary("tp_trainer");
}
