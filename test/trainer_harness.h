// Helpers for tests that drive the real trainer binary: synthetic token shards,
// running a command, reading main.log losses, model files and CSV reports,
// comparing runs. (test/trainer_run.h describes and runs one trainer run.)
#pragma once

#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "test/test_util.h"
#include "zero/base/csv.h"
#include "zero/layout/model_file.h"
#include "zero/base/rng.h"

// Token shards from a random sparse Markov chain over V tokens: each token has a
// few likely successors, so a model can learn something in a few steps.
inline void write_markov_shard(const std::string& path, int V, size_t n, uint64_t seed) {
    std::vector<uint16_t> tokens(n);
    Rng rng(seed);
    uint32_t t = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t r = rng.next_u32();
        t = (r & 3) == 0 ? r % V : (t * 7 + 13 + (r >> 8) % 3) % V;  // 3 successors, some noise
        tokens[i] = (uint16_t)t;
    }
    write_shard(path, tokens.data(), n);
}

// The first (B, T) batch of a shard, as the trainer's loader reads it, and the
// same batch in the file the PyTorch references under dev/ read
// (gpt2_reference.py, hf_reference.py): int32 B, T, then B*T inputs and B*T targets.
inline void first_batch(const std::string& shard, int B, int T, const std::string& tokens_file,
                        std::vector<int>& inputs, std::vector<int>& targets) {
    DataLoader loader;
    loader.init(shard, B, T, 0, 1, false, 0);
    loader.next_batch();
    inputs.assign(loader.inputs, loader.inputs + B * T);
    targets.assign(loader.targets, loader.targets + B * T);
    FILE* f = open_file(tokens_file, "wb");
    int shape[2] = {B, T};
    fwrite(shape, sizeof(int), 2, f);
    fwrite(inputs.data(), sizeof(int), B * T, f);
    fwrite(targets.data(), sizeof(int), B * T, f);
    fclose(f);
}

struct CommandResult {
    int status;          // exit code, or -1 if it did not exit normally
    std::string output;  // stdout and stderr together
};

inline CommandResult run_command(const std::string& cmd) {
    CommandResult r{-1, ""};
    FILE* p = popen((cmd + " 2>&1").c_str(), "r");
    if (!p) return r;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
    int st = pclose(p);
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return r;
}

// A test's working directory, emptied: a rerun in the same build directory
// must not find the last run's files (a run refuses a directory that holds
// another run's checkpoints).
inline void fresh_dir(const std::string& dir) {
    run_command("rm -rf " + dir);
    make_dir(dir);
}

// The values of a main.log's "s:<step> <tag>:<value>" lines, in order: tag "trl"
// for the training losses, "tel" for the validation losses.
inline std::vector<double> read_main_log(const std::string& main_log, const std::string& tag) {
    std::vector<double> values;
    FILE* f = fopen(main_log.c_str(), "r");
    if (!f) return values;
    char line[256], got[16];
    while (fgets(line, sizeof(line), f)) {
        int step;
        double value;
        if (sscanf(line, "s:%d %15[a-z]:%lf", &step, got, &value) == 3 && tag == got) values.push_back(value);
    }
    fclose(f);
    return values;
}

// every parameter of an llm.c model file, widened to fp32, in file order
inline std::vector<float> read_model_params(const std::string& path) {
    std::vector<float> out;
    if (!file_exists(path)) return out;
    ModelFile mf(path);
    ParamLayout layout(mf.cfg);
    std::vector<float> unit;
    out.resize(layout.file_numel());
    for (int u = 0; u < layout.num_units(); u++) {
        UnitSpec spec = layout.unit_spec(u);
        unit.assign(spec.numel, 0.0f);
        mf.read_unit(layout, u, unit.data());
        for (const TensorSpec& t : spec.tensors)
            std::copy(unit.begin() + t.offset_in_unit, unit.begin() + t.offset_in_unit + t.numel,
                      out.begin() + layout.file_offset(t.id, t.layer));
    }
    return out;
}

// ||a - b|| / ||b||, or +inf if the sizes differ or b is empty
inline double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
    if (a.size() != b.size() || b.empty()) return INFINITY;
    double num = 0, den = 0;
    for (size_t i = 0; i < a.size(); i++) {
        double d = (double)a[i] - b[i];
        num += d * d;
        den += (double)b[i] * b[i];
    }
    return std::sqrt(num / den);
}

inline double max_relative_loss_error(const std::vector<double>& a, const std::vector<double>& b) {
    if (a.size() != b.size() || b.empty()) return INFINITY;
    double worst = 0;
    for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::fabs(a[i] - b[i]) / std::fabs(b[i]));
    return worst;
}

inline bool files_identical(const std::string& a, const std::string& b) {
    FILE* fa = fopen(a.c_str(), "rb");
    FILE* fb = fopen(b.c_str(), "rb");
    bool same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb) same = false;
        if (ca == EOF || cb == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

// A trainer's CSV report (zero/base/csv.h reads it); a file that is not there
// reads as no rows, for the tests that count them.
using CsvRows = CsvTable;
inline CsvRows read_csv(const std::string& path) { return file_exists(path) ? read_csv_table(path) : CsvRows{}; }
