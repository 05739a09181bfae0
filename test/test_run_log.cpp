// What the CPU trainer says about its machine: it takes OMP_NUM_THREADS (or
// every core) and shares it among its emulated ranks, refuses a malformed
// value with one line, and prints the measured matmul peak in a unit that
// shows it (a CPU's is GFLOP/s; it once read "0.0 TFLOP/s"). The peak is the
// machine's record (zero/perf/peak_flops.h), not one run's probe: a record
// above the probe is what MFU divides by, one below it is raised, and a
// malformed record file is said and replaced.
//
// usage: test_run_log <train_gpt2_zero_cpu>
#include <unistd.h>

#include <cmath>
#include <string>

#include "test/trainer_run.h"
#include "zero/reproduce/run_command.h"

namespace {

// The "CPU threads: N per rank" and "measured matmul peak: X UNIT/s" of one short run.
struct Log {
    int status = -1;
    int threads = -1;
    double peak = -1;
    std::string unit, output;
    double mfu = -1;  // the last step's
    double scale() const {  // FLOP/s per printed unit
        const char* units[] = {"FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
        for (int u = 0; u < 6; u++)
            if (unit == units[u]) return std::pow(1000.0, u);
        return NAN;
    }
    double in_flops() const { return peak * scale(); }
    // whether the printed peak is `flops` as printed: within half its last digit (one decimal in its
    // unit), and the record file's 7 significant digits
    bool shows(double flops) const { return std::fabs(peak - flops / scale()) <= 0.05 + 1e-6 * std::fabs(peak); }
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
    at = r.output.rfind("MFU ");
    if (at != std::string::npos) log.mfu = atof(r.output.c_str() + at + 4);
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

    // the record: ZERO_PEAK_FILE, "<FLOP/s> <key>" per line
    const std::string record = "run_log/peak.txt", env = "OMP_NUM_THREADS=1 ZERO_PEAK_FILE=" + record;
    remove(record.c_str());
    Log first = run_with(trainer, env, 1);
    double probe = 0;
    char key[512] = "";
    FILE* f = fopen(record.c_str(), "r");
    EXPECT(f && fscanf(f, "%lf %511[^\n]", &probe, key) == 2, "no record written to %s", record.c_str());
    if (f) fclose(f);
    EXPECT(probe > 0 && first.shows(probe), "first run: printed %g, recorded %g",
           first.in_flops(), probe);
    auto write_record = [&](const std::string& text) {
        FILE* w = fopen(record.c_str(), "w");
        fputs(text.c_str(), w);
        fclose(w);
    };
    auto recorded = [&]() {
        double v = 0;
        FILE* r = fopen(record.c_str(), "r");
        if (r && fscanf(r, "%lf", &v) != 1) v = 0;
        if (r) fclose(r);
        return v;
    };
    // a record far above any probe: both runs divide by it, print the same peak and a tiny MFU
    char line[700];
    snprintf(line, sizeof(line), "%.6e other device\n%.6e %s\n", 5.0, probe * 1000, key);
    write_record(line);
    Log high1 = run_with(trainer, env, 1), high2 = run_with(trainer, env, 1);
    EXPECT(high1.shows(probe * 1000) && high1.peak == high2.peak,
           "a record of %g: runs printed %g and %g", probe * 1000, high1.in_flops(), high2.in_flops());
    EXPECT(high1.mfu >= 0 && high1.mfu < 1.0, "MFU against a record 1000x the probe: %g%%", high1.mfu);
    // a record below the probe is raised to it; other devices' lines are kept
    snprintf(line, sizeof(line), "%.6e %s\n%.6e other device\n", probe / 1000, key, 5.0);
    write_record(line);
    Log low = run_with(trainer, env, 1);
    std::string kept = read_text_file(record);
    EXPECT(recorded() > probe / 10 && low.shows(recorded()) &&
               kept.find("other device") != std::string::npos,
           "a record of %g: printed %g, now %g\n%s", probe / 1000, low.in_flops(), recorded(), kept.c_str());
    // a malformed record: said, replaced, the run goes on
    write_record("fast\n");
    Log garbled = run_with(trainer, env, 1);
    EXPECT(garbled.status == 0 && garbled.output.find("note: " + record) != std::string::npos && recorded() > 0,
           "a malformed record: exit %d\n%s", garbled.status, garbled.output.c_str());

    Log bad = run_with(trainer, "OMP_NUM_THREADS=many", 1);
    EXPECT(bad.status == 1 && bad.output.find("error: OMP_NUM_THREADS=many") != std::string::npos,
           "a malformed OMP_NUM_THREADS: exit %d\n%s", bad.status, bad.output.c_str());
    return test_summary("test_run_log");
}
