// The step-time model and the engine cannot drift apart: for runs across the
// stages, world sizes, tensor and sequence parallelism, offload and
// recomputation and pipeline stages, the trainer's own trace of each step (--mem_report 1 writes
// comm_trace_rank<r>.csv: every collective and host transfer as issued, with
// its group, bytes and unit) must equal, entry by entry, the collectives and
// transfers of zero/perf/step_ops.h's schedule for the same flags, which the
// test derives the way the trainer does (parse_flags, make_run_setup). With
// --offload_delay_steps W the trainer's first W steps are undelayed (not
// compared with device accumulation, see below), its step W the model's first
// delayed step (nothing pending) and later ones its second.
//
// usage: test_perf_trace <train_gpt2_zero_cpu>
#include <sstream>
#include <string>
#include <vector>

#include "test/trainer_run.h"
#include "zero/perf/step_ops.h"
#include "zero/run/run_setup.h"

namespace {

// The schedule's traced entries ("op group bytes unit") of step `step` (0 or 1), of the stage of `rank`.
std::vector<std::string> model_entries(const std::string& flags, int rank, int step = 0) {
    std::vector<std::string> words;
    std::istringstream in("trainer " + flags);
    for (std::string w; in >> w;) words.push_back(w);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(&w[0]);
    TrainOptions o;
    parse_flags((int)argv.size(), argv.data(), o);
    RunSetup run = make_run_setup(o);
    StepSchedule s = step_schedule(run.memory_query(o, run.grid().stage(rank)), step + 1);
    std::vector<std::string> out;
    for (const StepOp& op : s.ops)
        if (op.step == step && (op.collective() || op.transfer() || op.p2p()))
            out.push_back(op.kind + " " + op.group + " " + std::to_string(op.bytes) + " " + std::to_string(op.unit));
    return out;
}

// The trainer's entries of step `step` of rank `rank`.
std::vector<std::string> trace_entries(const std::string& dir, int rank, int step) {
    std::vector<std::string> out;
    CsvRows t = read_csv(dir + "/comm_trace_rank" + std::to_string(rank) + ".csv");
    for (size_t i = 0; i < t.rows.size(); i++)
        if (t.num(i, "step") == step)
            out.push_back(t.text(i, "op") + " " + t.text(i, "group") + " " + t.text(i, "bytes") + " " + t.text(i, "unit"));
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "perf_trace";
    run_command("rm -rf " + dir + " && mkdir -p " + dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);
    struct Case {
        int ranks;
        std::string flags;
        int delay = 0;  // --offload_delay_steps
    } cases[] = {
        {1, "-z 0"},
        {2, "-z 0 -d 384"},
        {2, "-z 1 -d 384"},
        {4, "-z 1 --offload_optimizer cpu"},
        {2, "-z 2 -d 384 -r 1"},
        {2, "-z 2 -d 384 --offload_optimizer cpu"},
        {2, "-z 2 -d 384 --offload_optimizer cpu --offload_grad_accum device"},
        {4, "-z 3"},
        {2, "-z 3 -d 384 -r 2 --offload_optimizer cpu --offload_param cpu --offload_activations 1"},
        {2, "-z 3 --tp 2 -r 2"},
        {4, "-z 3 --tp 2 --sp 1 -d 256"},
        {4, "-z 2 --tp 2 -r 2 --offload_activations 1 --offload_optimizer cpu"},
        {4, "-z 1 --tp 4"},
        {2, "-z 0 --tp 2 --sp 1 -r 1"},
        {2, "-z 0 --pp 2 -d 256"},
        {4, "-z 1 --pp 4 -d 512 --pp_schedule gpipe"},
        {4, "-z 2 --pp 2 --tp 2 -d 256 --offload_optimizer cpu"},
        {4, "-z 3 --pp 2 -d 512 -r 2"},
        {4, "-z 3 --pp 2 --tp 2 --sp 1 -d 256 --offload_optimizer cpu --offload_param cpu"},
        {2, "-z 1 --offload_optimizer cpu", 1},
        {2, "-z 2 -d 384 --offload_optimizer cpu --offload_grad_accum device", 2},
        {2, "-z 3 -d 384 --offload_optimizer cpu", 1},
    };
    int compared = 0;
    for (const Case& c : cases) {
        TrainerRun run = base;
        run.model = TINY_4_LAYERS, run.train = dir + "/train.bin", run.ranks = c.ranks;
        const int steps = c.delay ? c.delay + 2 : 2;
        const std::string delay = c.delay ? " --offload_delay_steps " + std::to_string(c.delay) : "";
        run.micro_batch = 2, run.seq_len = 32, run.steps = steps, run.mem_report = true;
        run.out = dir + "/run" + std::to_string(compared);
        run.extra = c.flags + delay + " -n -1";
        RunResult r = run.run();
        if (r.status != 0) continue;
        std::string flags = "-e " + std::string(TINY_4_LAYERS) + " -b 2 -t 32 --ranks " + std::to_string(c.ranks) + " " +
                            c.flags;
        size_t entries = 0;
        for (int rank = 0; rank < c.ranks; rank++) {
            std::vector<std::string> want = model_entries(flags, rank);
            EXPECT(want.size() > 4, "%s: the model lists %zu entries", flags.c_str(), want.size());
            entries += want.size();
            for (int step = 1; step <= steps; step++) {
                // (with device accumulation a delayed run's first W steps send the
                // gradients down at the last micro-step, as its delayed steps need, where
                // an undelayed run sends them during the step: the model has no twin for them)
                if (c.delay && step <= c.delay && c.flags.find("--offload_grad_accum device") != std::string::npos)
                    continue;
                if (c.delay && step > c.delay) want = model_entries(flags + delay, rank, step > c.delay + 1);
                std::vector<std::string> got = trace_entries(run.out, rank, step);
                size_t first = 0;
                while (first < got.size() && first < want.size() && got[first] == want[first]) first++;
                bool same = got.size() == want.size() && first == got.size();
                EXPECT(same, "%s, rank %d, step %d: %zu traced, %zu modelled; first difference at entry %zu: "
                       "traced '%s', modelled '%s'", (flags + delay).c_str(), rank, step, got.size(), want.size(), first,
                       first < got.size() ? got[first].c_str() : "(none)",
                       first < want.size() ? want[first].c_str() : "(none)");
            }
        }
        printf("%-90s %zu entries per step over the ranks: equal\n", (flags + delay).c_str(), entries);
        compared++;
    }
    EXPECT(compared == (int)(sizeof(cases) / sizeof(cases[0])), "%d of the runs compared", compared);
    return test_summary("perf_trace");
}
