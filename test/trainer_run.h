// One run of the trainer binary, described by its settings rather than by a
// hand-built command line, and what the tests read back from it:
//
//   TrainerRun run(trainer_from_args(argc, argv));
//   run.model = TINY, run.stage = 3, run.ranks = 2, run.steps = 10, run.out = "dir/z3";
//   RunResult r = run.run();           // a failed check unless it exits 0
//   r.train_losses, r.model_at(10), r.mem_report(rank), ...
//
// Unset fields (empty strings, empty optionals, false) are left off the command
// line, so the trainer's own defaults hold; `extra` goes last, verbatim, for any
// other flag (the learning-rate schedule, --seed, ...) or to override one.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "test/model_shapes.h"
#include "test/test_util.h"
#include "test/trainer_harness.h"
#include "zero/engine/checkpoint.h"

// The model file a run with output directory `out` checkpointed at `step`.
inline std::string checkpoint_model(const std::string& out, int step) {
    return checkpoint_dir(out, step) + "/model.bin";
}

// A step's line on the trainer's stdout: "step n/N | loss L | ... [| scale S[ (skipped)]] ...".
struct StepLine {
    int step = 0;
    double loss = NAN;
    double scale = NAN;    // fp16 runs only: the loss scale the step used
    bool skipped = false;  // fp16: the gradients overflowed, the step was not taken
};

struct RunResult {
    std::string command;  // what ran
    int status = -1;      // exit status, -1 if it did not exit normally
    std::string output;   // stdout and stderr together
    std::string out;      // its output directory (-o), or empty
    std::vector<double> train_losses, val_losses;  // from out/main.log, in step order
    std::vector<StepLine> steps;                   // rank 0's step lines, in order

    std::string model_at(int step) const { return checkpoint_model(out, step); }
    // the per-step CSVs of --mem_report, one pair per rank
    CsvRows mem_report(int rank) const { return read_csv(out + "/mem_report_rank" + std::to_string(rank) + ".csv"); }
    CsvRows comm_report(int rank) const { return read_csv(out + "/comm_report_rank" + std::to_string(rank) + ".csv"); }
};

inline std::vector<StepLine> parse_step_lines(const std::string& output) {
    std::vector<StepLine> steps;
    size_t pos = 0;
    while (pos < output.size()) {
        size_t eol = output.find('\n', pos);
        if (eol == std::string::npos) eol = output.size();
        std::string line = output.substr(pos, eol - pos);
        pos = eol + 1;
        StepLine s;
        int total;
        if (sscanf(line.c_str(), "step %d/%d | loss %lf", &s.step, &total, &s.loss) != 3) continue;
        size_t scale = line.find("| scale ");
        if (scale != std::string::npos) {
            s.scale = atof(line.c_str() + scale + 8);
            s.skipped = line.find("(skipped)", scale) != std::string::npos;
        }
        steps.push_back(s);
    }
    return steps;
}

struct TrainerRun {
    std::string trainer;                  // the binary
    std::string model;                    // -e: a shape (test/model_shapes.h), d12..d48, or an llm.c model file
    std::string train, val;               // -i, -j: token shards
    std::string out;                      // -o: main.log, the reports' CSVs, checkpoints
    std::optional<int> micro_batch;       // -b: sequences per rank per micro-step
    std::optional<int> seq_len;           // -t
    std::optional<long> total_batch;      // -d: tokens per optimizer step; more than one micro-step on every
                                          //     rank holds means gradient accumulation
    std::optional<int> steps;             // -x
    std::optional<int> stage;             // -z: ZeRO stage
    std::optional<int> ranks;             // --ranks: emulated ranks in the one process
    std::string precision;                // -p: fp32 | bf16 | fp16
    std::optional<int> recompute;         // -r: 0, 1 (GELU), 2 (whole layers)
    bool offload_optimizer = false;       // --offload_optimizer cpu
    bool offload_param = false;           // --offload_param cpu
    bool offload_activations = false;     // --offload_activations 1
    std::string offload_grad_accum;       // --offload_grad_accum host|device
    std::optional<int> checkpoint_every;  // -n
    bool resume = false;                  // -y 1: from the latest complete checkpoint in out
    bool mem_report = false;              // --mem_report 1: per-step memory and traffic, CSVs in out
    int val_every = 0, sample_every = 0;  // -v, -s: tests train without validation or samples unless they ask
    std::string extra;                    // any other flags, last

    explicit TrainerRun(std::string trainer_binary) : trainer(std::move(trainer_binary)) {}

    std::string command() const {
        std::string c = trainer;
        auto add = [&c](const char* flag, const std::string& value) { c += std::string(" ") + flag + " " + value; };
        auto add_int = [&](const char* flag, std::optional<long> v) {
            if (v) add(flag, std::to_string(*v));
        };
        if (!model.empty()) add("-e", model);
        if (!train.empty()) add("-i", train);
        if (!val.empty()) add("-j", val);
        if (!out.empty()) add("-o", out);
        add_int("-b", micro_batch);
        add_int("-t", seq_len);
        add_int("-d", total_batch);
        add_int("-x", steps);
        add_int("-z", stage);
        add_int("--ranks", ranks);
        if (!precision.empty()) add("-p", precision);
        add_int("-r", recompute);
        if (offload_optimizer) add("--offload_optimizer", "cpu");
        if (offload_param) add("--offload_param", "cpu");
        if (offload_activations) add("--offload_activations", "1");
        if (!offload_grad_accum.empty()) add("--offload_grad_accum", offload_grad_accum);
        add_int("-n", checkpoint_every);
        if (resume) add("-y", "1");
        if (mem_report) add("--mem_report", "1");
        add_int("-v", val_every);
        add_int("-s", sample_every);
        if (!extra.empty()) c += " " + extra;
        return c;
    }

    // Runs it, and checks that it exited 0 (if not, the check's message holds
    // the command and everything it printed).
    RunResult run() const {
        RunResult r = try_run();
        EXPECT(r.status == 0, "`%s` exited %d:\n%s", r.command.c_str(), r.status, r.output.c_str());
        return r;
    }

    // Runs it and expects nothing: for runs that should be refused.
    RunResult try_run() const {
        RunResult r;
        r.command = command();
        CommandResult c = run_command(r.command);
        r.status = c.status;
        r.output = c.output;
        r.out = out;
        r.steps = parse_step_lines(r.output);
        if (!out.empty()) {
            r.train_losses = read_main_log(out + "/main.log", "trl");
            r.val_losses = read_main_log(out + "/main.log", "tel");
        }
        return r;
    }
};

// Runs `base` with `extra` flags on `ranks` ranks (micro-batch 2) and expects
// bad input's answer: exit status 1 and one "error:" line, the last, holding `needle`.
inline void expect_one_line_error(TrainerRun run, const std::string& extra, int ranks, const char* needle) {
    run.ranks = ranks;
    run.micro_batch = 2;
    run.extra += " " + extra;
    RunResult r = run.try_run();
    size_t at = r.output.find("error: ");
    bool one_line = at != std::string::npos && r.output.find('\n', at) == r.output.size() - 1;
    EXPECT(r.status == 1 && r.output.find(needle) != std::string::npos && one_line,
           "'%s': expected a one-line error containing '%s', got status %d:\n%s", r.command.c_str(), needle, r.status,
           r.output.c_str());
}

// The trainer binary a test was given: its one argument.
inline std::string trainer_from_args(int argc, char** argv) {
    return test_args(argc, argv, "<train_gpt2_zero_cpu>")[0];
}
