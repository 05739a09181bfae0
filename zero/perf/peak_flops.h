// The measured peak of this machine's matmuls in the compute dtype (the
// denominator of MFU): a large square matmul through the same kernel the model
// uses (cuBLASLt on the GPU, gemm_cpu on the CPU build), best of a few runs;
// and the record that keeps MFU from moving with the machine's load.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "zero/base/common.h"
#include "zero/base/dtype.h"
#include "zero/base/rng.h"

// The best of the products, until `patience` in a row have not beaten it by 1%
// (at most 100): a machine busy for a moment (another process on a core) only
// delays the probe, it cannot halve it.
template <typename T>
double measure_matmul_peak_flops(const KernelCtx& ctx, int n, int patience = 12) {
    size_t elems = (size_t)n * n;
    T* a = (T*)device_malloc(elems * sizeof(T));
    T* b = (T*)device_malloc(elems * sizeof(T));
    T* c = (T*)device_malloc(elems * sizeof(T));
    // Random values, never zeros: tensor cores run measurably faster on zeros (a
    // bf16 8192^3 product: 889 TFLOP/s on zeros, ~800 on random data, H100), which
    // would inflate the peak and understate MFU.
    {
        std::vector<T> h(elems);
#pragma omp parallel for schedule(static)
        for (long long i = 0; i < (long long)elems; i++) h[i] = from_float<T>(2.0f * random_uniform(0x9ea4ull, i) - 1.0f);
        device_copy(a, h.data(), elems * sizeof(T), ctx.stream);  // a @ a^T times like any other product
        device_copy(b, h.data(), elems * sizeof(T), ctx.stream);
        stream_sync(ctx.stream);  // h is freed at the end of this block
    }
    double best = 0.0;
    for (int rep = 0, since = 0; rep < 100 && since < patience; rep++, since++) {
        stream_sync(ctx.stream);
        HostClock clock;
        matmul_forward(ctx, c, a, b, (const T*)nullptr, n, n, n, (T*)nullptr);
        stream_sync(ctx.stream);
        double rate = 2.0 * n * n * (double)n / clock.seconds();
        if (rep > 0 && rate > 1.01 * best) since = 0;  // the first run warms up
        if (rep > 0) best = std::max(best, rate);
    }
    device_free(a);
    device_free(b);
    device_free(c);
    return best;
}

// Model flops per token of training (forward + backward): 6 per parameter plus
// causal attention's 6*L*C*T.
inline double train_flops_per_token(size_t params, const GPT2Config& cfg, int T) {
    return 6.0 * (double)params + 6.0 * cfg.num_layers * (double)cfg.channels * T;
}

// "791.3 TFLOP", "61.2 GFLOP", "1.5 MFLOP": three significant figures or so at any scale
// (a CPU's peak printed in TFLOP/s would read 0.0).
inline std::string flops_text(double flops) {
    const char* units[] = {"FLOP", "kFLOP", "MFLOP", "GFLOP", "TFLOP", "PFLOP"};
    int u = 0;
    while (u < 5 && flops >= 1000.0) flops /= 1000.0, ++u;
    return strf("%.1f %s", flops, units[u]);
}

// ---------------------------------------------------------------------------
// The peak record. One probe is at the mercy of whatever else the machine runs:
// two identical CPU runs once printed MFU 51% and 95% because a busy moment
// halved one run's probe. Load can only make a probe slower, so the best probe
// ever seen is the stable estimate: runs share it through a small text file,
// one line per (device, dtype, threads): "<FLOP/s> <key>". Each run probes,
// raises the record when it beats it, and divides by the record, so identical
// runs print MFUs in the ratio of their step times. Where a record exists the
// probe is short (it can only raise the record, never lower it): two products
// and on while they improve, instead of a dozen; on two cores that is most
// of a tiny model's run saved. The file is
// $ZERO_PEAK_FILE, else build/matmul_peak.txt beside the trainer (when that
// folder exists); delete it to start the record afresh.

// What the record is kept for: "<device name> <dtype> <threads> thread(s)".
inline std::string device_name() {
#ifdef ZERO_CUDA
    int dev = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaDeviceProp p;
    cudaCheck(cudaGetDeviceProperties(&p, dev));
    return p.name;
#else
    std::string name = "cpu";
    std::ifstream in("/proc/cpuinfo");
    for (std::string l; std::getline(in, l);) {
        if (l.rfind("model name", 0) != 0) continue;
        size_t colon = l.find(':');
        if (colon != std::string::npos) name = l.substr(l.find_first_not_of(" \t", colon + 1));
        while (!name.empty() && name.back() == ' ') name.pop_back();
        break;
    }
    return name;
#endif
}

inline std::string peak_record_path() {
    const char* env = getenv("ZERO_PEAK_FILE");
    if (env && *env) return env;
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0) return "";
    const std::string path(exe, (size_t)n), dir = path.substr(0, path.rfind('/') + 1) + "build";
    return file_exists(dir) ? dir + "/matmul_peak.txt" : "";
}

struct PeakRecord {
    double flops = 0;   // the denominator: the record after this run's probe
    double probe = 0;   // this run's own probe
    std::string path;   // where the record is kept ("" if nowhere)
    std::string note;   // a malformed record file, said once
};

// Folds this run's probe, `probe(recorded)` (recorded: the record has `key`
// already), into the record for `key` and returns both.
template <typename Probe>
PeakRecord update_peak_record(const std::string& key, Probe&& probe, const std::string& path) {
    PeakRecord r{.path = path};
    std::vector<std::pair<double, std::string>> entries;
    std::ifstream in(path);  // none yet (or no path): no entries
    for (std::string l; !path.empty() && std::getline(in, l);) {
        double v = 0;
        int used = 0;
        if (sscanf(l.c_str(), "%lf %n", &v, &used) != 1 || !(v > 0) || used <= 0 || (size_t)used >= l.size()) {
            r.note = "note: " + path + " holds a line that is not \"<FLOP/s> <device>\": the record starts afresh";
            entries.clear();
            break;
        }
        entries.push_back({v, l.substr(used)});
    }
    const bool found = std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.second == key; });
    r.probe = r.flops = probe(found);
    if (path.empty()) return r;
    for (auto& e : entries)
        if (e.second == key) r.flops = e.first = std::max(e.first, r.probe);
    if (!found) entries.push_back({r.probe, key});
    // written whole under another name, then renamed: a reader never sees half a file
    std::string tmp = path + ".tmp." + std::to_string(getpid());
    if (FILE* f = fopen(tmp.c_str(), "w")) {
        for (const auto& e : entries) fprintf(f, "%.6e %s\n", e.first, e.second.c_str());
        bool ok = fclose(f) == 0;
        if (!ok || rename(tmp.c_str(), path.c_str()) != 0) remove(tmp.c_str());
    }
    return r;
}
