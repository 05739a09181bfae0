// --pp through the trainer binary (test_pipeline.cpp checks the grid in
// process: bytes, memory per stage, the tied copies, every ZeRO stage):
//   * dp x tp x pp grids train to --pp 1's losses, validation losses, samples
//     and final model.bin at the same batch and tensor ranks, bit for bit, from
//     a fresh model and from an llm.c model file; in bf16 too, where a later
//     stage's layers round their parameters by the whole model's keys (the
//     stochastic rounding of element e is keyed by e's place in the whole
//     model, so --pp 1's layer l and a stage's layer l round alike);
//   * the start-up prints the grid and its rank order and the pipeline; the
//     end, the bubble line, measured beside the formula; with -o the slots'
//     times land in pipeline_timeline.csv, each stage's 2m slots;
//   * --mem_report counts the pipeline's bytes beside the collectives';
//   * --pp_schedule_print prints each stage's slots and exits;
//   * bad input is one line and status 1: --pp not dividing the world, more
//     stages than layers, --pp_layers that do not sum to L or do not give P
//     stages, --pp_layers without --pp, an unknown schedule.
//
// usage: test_pp_trainer <path to train_gpt2_zero_cpu>
#include <cstdio>
#include <string>

#include "test/trainer_run.h"

// Where two model files' parameters first differ: ", first in layer l" (or the embeddings, the final layernorm).
static std::string first_layer_differing(const std::string& a, const std::string& b) {
    if (!file_exists(a) || !file_exists(b)) return "";
    ModelFile fa(a), fb(b);
    ParamLayout layout(fa.cfg);
    for (int u = 0; u < layout.num_units(); u++) {
        std::vector<float> ua(layout.unit_spec(u).numel), ub(ua.size());
        fa.read_unit(layout, u, ua.data()), fb.read_unit(layout, u, ub.data());
        if (ua != ub)
            return u == layout.embed_unit()   ? ", first in the embeddings"
                   : u == layout.final_unit() ? ", first in the final layernorm"
                                              : ", first in layer " + std::to_string(u - 1);
    }
    return "";
}

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    std::string dir = "pp_trainer";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 3);
    write_markov_shard(dir + "/val.bin", TINY_VOCAB, 4000, 4);
    base.model = TINY_4_LAYERS;
    base.train = dir + "/train.bin";
    base.val = dir + "/val.bin";
    base.seq_len = 32;
    base.steps = 5;
    base.val_every = 2;
    base.sample_every = 5;
    base.extra = "--seed 7 -l 2e-3 -c 0.1 -m 2 -g 12";

    struct Grid {
        int ranks, tp, pp, stage, micro_batch;
        const char* more;       // flags of the pipelined run only
        const char* both = "";  // flags of both runs
    };
    // each against the same batch on ranks / pp ranks without a pipeline
    int k = 0;
    for (Grid g : {Grid{8, 2, 4, 2, 2, ""}, Grid{4, 1, 2, 1, 2, "--pp_layers 3,1 --pp_schedule gpipe"},
                   Grid{4, 2, 2, 3, 4, "-r 2"}, Grid{3, 1, 3, 0, 4, ""}, Grid{4, 1, 2, 2, 2, "", "-p bf16"},
                   Grid{4, 2, 2, 1, 2, "--pp_layers 1,3", "-p bf16 --offload_optimizer cpu"}}) {
        k++;
        auto run_of = [&](int pp, const std::string& more) {
            TrainerRun r = base;
            r.ranks = g.ranks / (g.pp / pp);
            r.stage = g.stage;
            r.micro_batch = g.micro_batch;
            r.total_batch = 4 * 32 * 4;  // 4 micro-steps of 4 sequences
            r.out = dir + "/grid" + std::to_string(k) + "_pp" + std::to_string(pp);
            r.extra += " --tp " + std::to_string(g.tp) + " --pp " + std::to_string(pp) + " " + more + " " + g.both;
            return r.run();
        };
        RunResult ref = run_of(1, std::string(g.more).find("-r 2") != std::string::npos ? "-r 2" : "");
        RunResult pp = run_of(g.pp, g.more);
        const char* cmd = pp.command.c_str();
        EXPECT(ref.train_losses.size() == 5 && ref.val_losses.size() == 4, "%s: %zu losses", ref.command.c_str(),
               ref.train_losses.size());
        EXPECT(pp.train_losses == ref.train_losses && pp.val_losses == ref.val_losses,
               "%s: losses differ from --pp 1's", cmd);
        EXPECT(files_identical(pp.model_at(5), ref.model_at(5)), "%s: model.bin differs from --pp 1's (%.3g)%s", cmd,
               relative_error(read_model_params(pp.model_at(5)), read_model_params(ref.model_at(5))),
               first_layer_differing(pp.model_at(5), ref.model_at(5)).c_str());
        auto sample = [](const RunResult& r) {
            size_t at = r.output.find("sample: ");
            return at == std::string::npos ? std::string() : r.output.substr(at, r.output.find('\n', at) - at);
        };
        EXPECT(!sample(ref).empty() && sample(pp) == sample(ref), "%s: samples differ:\n  %s\n  %s", cmd,
               sample(pp).c_str(), sample(ref).c_str());
        char grid[160];
        snprintf(grid, sizeof(grid), "grid: %d ranks = %d data-parallel x %d tensor-parallel x %d pipeline stages",
                 g.ranks, g.ranks / (g.tp * g.pp), g.tp, g.pp);
        EXPECT(pp.output.find(grid) != std::string::npos &&
                   pp.output.find("rank = (stage*") != std::string::npos &&
                   pp.output.find("pipeline bubble (") != std::string::npos &&
                   pp.output.find("beside (P-1)/(m+P-1) = ") != std::string::npos,
               "%s: no grid, rank order or bubble line:\n%s", cmd, pp.output.c_str());
        CsvRows timeline = read_csv(pp.out + "/pipeline_timeline.csv");
        const int m = 4 * 4 / (g.micro_batch * (g.ranks / (g.tp * g.pp)));  // micro-batches per step
        EXPECT(timeline.rows.size() == (size_t)g.pp * 2 * m, "%s: %zu rows of slot times, want %d", cmd,
               timeline.rows.size(), g.pp * 2 * m);
        printf("%s: %s --pp 1\n", cmd, pp.train_losses == ref.train_losses ? "bit-identical to" : "DIFFERS from");
    }

    // from an llm.c model file: each stage reads its own units
    TrainerRun from_file = base;
    from_file.model = checkpoint_model(dir + "/grid2_pp1", 5);
    from_file.val_every = from_file.sample_every = 0;
    from_file.steps = 3;
    from_file.micro_batch = 2;
    from_file.total_batch = 2 * 32 * 2;
    from_file.out = dir + "/file_pp1";
    RunResult file_ref = from_file.run();
    from_file.ranks = 4;
    from_file.extra += " --pp 4";
    from_file.out = dir + "/file_pp4";
    from_file.mem_report = true;
    RunResult file_pp = from_file.run();
    EXPECT(file_pp.train_losses == file_ref.train_losses && !file_ref.train_losses.empty() &&
               files_identical(file_pp.model_at(3), file_ref.model_at(3)),
           "from %s: --pp 4 differs from --pp 1", from_file.model.c_str());
    EXPECT(file_pp.output.find("| pipeline sent ") != std::string::npos, "--mem_report: no pipeline bytes:\n%s",
           file_pp.output.c_str());

    // the schedule, printed
    TrainerRun print = base;
    print.ranks = 4;
    print.micro_batch = 1;
    print.total_batch = 8 * 32;
    print.extra += " --pp 4 --pp_schedule_print 1";
    RunResult printed = print.run();
    EXPECT(printed.output.find("1f1b schedule, 4 stage(s), 8 micro-batch(es)") != std::string::npos &&
               printed.output.find("stage 3 (0 warm-up, at most 1 in flight): F0 B0 F1 B1") != std::string::npos &&
               printed.output.find("step ") == std::string::npos,
           "--pp_schedule_print:\n%s", printed.output.c_str());

    // bad input: one line each, exit status 1
    auto expect_error = [&](const std::string& extra, int ranks, const char* needle) {
        expect_one_line_error(base, extra, ranks, needle);
    };
    expect_error("--pp 2", 3, "world size 3 is not a multiple of --tp 1 x --pp 2");
    expect_error("--pp 4 --tp 2", 4, "world size 4 is not a multiple of --tp 2 x --pp 4");
    expect_error("--pp 5", 5, "--pp 5 is more stages than the model's 4 layers");
    expect_error("--pp 2 --pp_layers 2,1", 2, "--pp_layers '2,1' sums to 3 layers, the model has 4");
    expect_error("--pp 2 --pp_layers 1,1,2", 2, "gives 3 stage(s), --pp is 2");
    expect_error("--pp 2 --pp_layers 4,0", 2, "every stage holds at least one layer");
    expect_error("--pp_layers 4", 1, "--pp_layers sets the layers of each pipeline stage: it needs --pp > 1");
    expect_error("--pp 2 --pp_schedule zb", 2, "--pp_schedule must be 1f1b or gpipe (got 'zb')");
    expect_error("--pp 0", 1, "--tp and --pp must be at least 1");
    return test_summary("pp_trainer");
}
