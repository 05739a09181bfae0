// What the CPU trainer says about its machine: it takes OMP_NUM_THREADS (or
// every core) and shares it among its emulated ranks, refuses a malformed
// value with one line, and prints the measured matmul peak in a unit that
// shows it (a CPU's is GFLOP/s; it once read "0.0 TFLOP/s").
//
// usage: test_run_log <train_gpt2_zero_cpu>
#include <unistd.h>

#include <string>

#include "test/trainer_run.h"

namespace {

// The "CPU threads: N per rank" and "measured matmul peak: X UNIT/s" of one short run.
struct Log {
    int status = -1;
    int threads = -1;
    double peak = -1;
    std::string unit, output;
};

Log run_with(const std::string& trainer, const std::string& env, int ranks) {
    TrainerRun run(env + " " + trainer);
    run.model = TINY, run.train = "run_log/train.bin", run.ranks = ranks;
    run.micro_batch = 1, run.seq_len = 32, run.steps = 1;
    RunResult r = run.try_run();
    Log log;
    log.status = r.status, log.output = r.output;
    size_t at = r.output.find("CPU threads: ");
    if (at != std::string::npos) log.threads = atoi(r.output.c_str() + at + 13);
    at = r.output.find("measured matmul peak: ");
    if (at != std::string::npos) {
        char unit[16] = "";
        if (sscanf(r.output.c_str() + at + 22, "%lf %15s", &log.peak, unit) == 2) log.unit = unit;
    }
    return log;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string trainer = trainer_from_args(argc, argv);
    make_dir("run_log");
    write_markov_shard("run_log/train.bin", TINY_VOCAB, 4096, 3);
    const int cores = (int)sysconf(_SC_NPROCESSORS_ONLN);

    struct Case {
        const char* env;
        int ranks, want;
    } cases[] = {
        {"OMP_NUM_THREADS=1", 1, 1},
        {"OMP_NUM_THREADS=3", 1, 3},
        {"OMP_NUM_THREADS=4", 2, 2},
        {"OMP_NUM_THREADS=1", 2, 1},
        {"env -u OMP_NUM_THREADS", 1, cores},
        {"env -u OMP_NUM_THREADS", 2, std::max(1, cores / 2)},
    };
    for (const Case& c : cases) {
        Log log = run_with(trainer, c.env, c.ranks);
        EXPECT(log.status == 0, "%s --ranks %d: exit %d\n%s", c.env, c.ranks, log.status, log.output.c_str());
        EXPECT(log.threads == c.want, "%s --ranks %d: %d threads per rank, expected %d", c.env, c.ranks, log.threads,
               c.want);
        EXPECT(log.peak >= 1.0 && log.unit.find("FLOP/s") != std::string::npos,
               "%s: the peak reads \"%g %s\"", c.env, log.peak, log.unit.c_str());
    }
    Log one = run_with(trainer, "OMP_NUM_THREADS=1", 1);
    printf("one thread: measured matmul peak %.1f %s\n", one.peak, one.unit.c_str());

    Log bad = run_with(trainer, "OMP_NUM_THREADS=many", 1);
    EXPECT(bad.status == 1 && bad.output.find("error: OMP_NUM_THREADS=many") != std::string::npos,
           "a malformed OMP_NUM_THREADS: exit %d\n%s", bad.status, bad.output.c_str());
    return test_summary("test_run_log");
}
