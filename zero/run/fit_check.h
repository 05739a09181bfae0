// Guard rails: before anything is allocated, the predicted per-rank memory is
// compared with what the machine has. A run that cannot fit is refused with the
// numbers, and with the changes that would make it fit (a smaller micro-batch,
// a higher stage, offload, recomputation), each checked by the same predictor.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "zero/run/flags.h"
#include "zero/engine/memory_predictor.h"
#include "zero/run/run_setup.h"

// What the predictor does not count, kept free on purpose. Device: cuBLASLt's
// workspace, the peak-FLOPs probe's three square matrices (0.4-0.8 GiB), NCCL's
// buffers and fragmentation: 1 GiB plus 2% (the CUDA context itself is already
// outside cudaMemGetInfo's "free"). Host: pinned memory cannot be swapped, and the
// OS, the page cache and the data loader need room: 4 GiB plus 10% of MemAvailable.
constexpr double DEVICE_MARGIN_BYTES = 1073741824.0, DEVICE_MARGIN_FRACTION = 0.02;
constexpr double HOST_MARGIN_BYTES = 4.0 * 1073741824.0, HOST_MARGIN_FRACTION = 0.10;

struct MemoryCapacity {
    double device = 0;  // bytes the ranks of this process may use on the device (margin taken off)
    double host = 0;    // bytes of host memory available (margin taken off)
    double device_margin = 0, host_margin = 0;  // what was taken off, printed with a refusal
    bool shared = false;  // CPU build without --device_memory: "device" and host are the same RAM
    std::string device_what;
};

inline double host_available_bytes() {
    FILE* f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024.0;
}

inline MemoryCapacity memory_capacity(const TrainOptions& o) {
    MemoryCapacity c;
    const double host_total = host_available_bytes();
    c.host_margin = host_total > 0 ? HOST_MARGIN_BYTES + HOST_MARGIN_FRACTION * host_total : 0;
    c.host = host_total > 0 ? std::max(host_total - c.host_margin, 1.0) : 0;  // 0: unknown
    if (o.device_memory_mib > 0) {  // the user's number, as given: planning for another GPU
        c.device = o.device_memory_mib * 1048576.0;
        c.device_what = "--device_memory";
        return c;
    }
#ifdef ZERO_CUDA
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    c.device_margin = DEVICE_MARGIN_BYTES + DEVICE_MARGIN_FRACTION * (double)free_b;
    c.device = std::max((double)free_b - c.device_margin, 0.0);
    c.device_what = "free on the GPU, less the margin";
#else
    c.device = c.host;
    c.shared = true;
    c.device_what = "available RAM, less the margin";
#endif
    return c;
}

// Does a run with this query fit, for `ranks` ranks sharing this process's memory?
inline bool fits(const MemoryQuery& q, int ranks, const MemoryCapacity& cap, double* device_need, double* host_need) {
    MemoryPrediction p = predict_memory(q, SHARD_ALIGN);
    double dev = (double)p.reserved.total(Arena::Device) * ranks, host = (double)p.reserved.total(Arena::Host) * ranks;
    if (device_need) *device_need = dev;
    if (host_need) *host_need = host;
    if (cap.host <= 0) return true;  // unknown: do not guess
    return cap.shared ? dev + host <= cap.host : dev <= cap.device && host <= cap.host;
}

inline void refuse_if_too_big(const TrainOptions& o, const RunSetup& run) {
    MemoryCapacity cap = memory_capacity(o);
    MemoryQuery q = run.memory_query(o);
    int ranks = run.ranks_per_process;
    double dev = 0, host = 0;
    if (fits(q, ranks, cap, &dev, &host)) return;

    // what would fit instead, each alternative checked by the predictor
    struct Option {
        std::string flags;
        MemoryQuery q;
    };
    std::vector<Option> options;
    for (int b = o.micro_batch / 2; b >= 1; b /= 2) {
        MemoryQuery a = q;
        a.micro_batch = b;
        a.micro_steps = q.micro_steps * (o.micro_batch / b);
        if (o.micro_batch % b == 0) options.push_back({"-b " + std::to_string(b) + " (same tokens per step)", a});
    }
    for (int z = q.stage + 1; z <= 3; z++) {
        MemoryQuery a = q;
        a.stage = z;
        options.push_back({"-z " + std::to_string(z), a});
    }
    if (!q.offload_optimizer && q.stage >= 1) {
        MemoryQuery a = q;
        a.offload_optimizer = true;
        options.push_back({"--offload_optimizer cpu", a});
    }
    {
        MemoryQuery a = q;
        a.stage = 3, a.offload_optimizer = true, a.offload_param = true;
        options.push_back({"-z 3 --offload_optimizer cpu --offload_param cpu", a});
    }
    for (int r = q.recompute + 1; r <= 2; r++) {
        MemoryQuery a = q;
        a.recompute = r;
        options.push_back({"-r " + std::to_string(r), a});
    }
    const double GiB = 1073741824.0;
    printf("this run does not fit: per process it needs %.2f GiB of device memory and %.2f GiB of host memory;\n",
           dev / GiB, host / GiB);
    if (cap.shared) printf("  both are this machine's RAM here: %.2f GiB available after a %.2f GiB margin\n",
                           cap.host / GiB, cap.host_margin / GiB);
    else printf("  the device has %.2f GiB (%s of %.2f GiB), the host %.2f GiB available after a %.2f GiB margin\n",
                cap.device / GiB, cap.device_what.c_str(), cap.device_margin / GiB, cap.host / GiB, cap.host_margin / GiB);
    int shown = 0;
    for (const Option& opt : options) {
        double d = 0, h = 0;
        if (!fits(opt.q, ranks, cap, &d, &h)) continue;
        if (shown++ == 0) printf("  these would fit:\n");
        printf("    %-52s device %8.2f GiB, host %8.2f GiB\n", opt.flags.c_str(), d / GiB, h / GiB);
    }
    if (shown == 0) printf("  no single change of micro-batch, stage, offload or recompute makes it fit\n");
    fflush(stdout);  // the explanation before the one-line error on stderr
    fail("predicted out of memory: needs %.2f GiB device + %.2f GiB host per process, has %.2f GiB%s (see above)",
         dev / GiB, host / GiB, (cap.shared ? cap.host : cap.device) / GiB, cap.shared ? " of RAM" : " on the device");
}
