// Guard rails: before anything is allocated, the predicted memory is compared
// with what the run will have, and a run that cannot fit is refused with the
// numbers and the cheapest changes that would make it fit.
//
// Two questions, answered apart:
//   * the plan, per rank: does one rank's prediction fit one device of the size
//     planned for (--device_memory, else this machine's device)? This is what
//     "would this fit on N GPUs of this size" asks, whatever N is;
//   * this machine: do the ranks this process runs (all of them when emulating
//     with --ranks) fit the one device and the host memory it really has?
// A run needs both; --estimate 1 prints both and exits 1 if the plan does not
// fit. The advice searches combinations of stage, micro-batch (with gradient
// accumulation keeping the tokens per step), recomputation and offload, and
// prints the cheapest few that fit, cheapest first, each checked by the
// predictor; and, on more devices, the fewest pipeline stages that fit. A
// pipelined run fits if its fullest stage does.
#pragma once

#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "zero/run/flags.h"
#include "zero/engine/memory_predictor.h"
#include "zero/run/run_setup.h"

constexpr double GiB = 1073741824.0;  // bytes
constexpr double DEVICE_MARGIN_BYTES = GiB, DEVICE_MARGIN_FRACTION = 0.02;
constexpr double HOST_MARGIN_BYTES = 4.0 * GiB, HOST_MARGIN_FRACTION = 0.10;

struct MemoryCapacity {
    double plan_device = 0;  // bytes of one rank's device in the plan (margin taken off where measured)
    double device = 0;       // bytes the ranks of this process may use on this machine's device
    double host = 0;         // bytes of host memory available (margin taken off); 0: unknown
    double plan_host = 0;    // bytes of one rank's host in the plan: --host_memory, else `host`
    double disk = 0;         // NVMe offload: bytes free on --nvme_path's disk (with this run's old files); 0: unknown
    double plan_disk = 0;    // one rank's disk in the plan: --disk_memory, else `disk`
    double device_margin = 0, host_margin = 0;  // what was taken off, printed with a refusal
    bool shared = false;   // CPU build: this machine's "device" is its RAM, shared with the host arena
    bool planned = false;  // --device_memory: the plan's device is not this machine's
    bool host_planned = false;  // --host_memory: nor its host
    std::string device_what;
};

inline std::string gib_text(double bytes) { return strf("%.2f GiB", bytes / GiB); }

inline double host_available_bytes() { return proc_kb_field_bytes("/proc/meminfo", "MemAvailable"); }

// Bytes free for NVMe offload's files under dir: the disk's free space plus
// what the files of an earlier run there already hold (a run truncates them
// before it allocates its own); 0 if dir cannot be looked at (the disk's own
// checks then say why).
inline double disk_free_bytes(const std::string& dir) {
    struct statvfs fs;
    if (dir.empty() || statvfs(dir.c_str(), &fs) != 0) return 0;
    double free_b = (double)fs.f_bavail * fs.f_frsize;
    for (int r = 0;; r++) {
        struct stat st;
        if (stat(disk_states_file(dir, r).c_str(), &st) != 0) break;
        free_b += (double)st.st_blocks * 512;
    }
    return free_b;
}

inline MemoryCapacity memory_capacity(const TrainOptions& o) {
    MemoryCapacity c;
    if (o.offload_optimizer == "nvme") c.disk = c.plan_disk = disk_free_bytes(o.nvme_path);
    if (o.disk_memory_mib > 0) c.plan_disk = o.disk_memory_mib * 1048576.0;
    const double host_total = host_available_bytes();
    c.host_margin = host_total > 0 ? HOST_MARGIN_BYTES + HOST_MARGIN_FRACTION * host_total : 0;
    c.host = host_total > 0 ? std::max(host_total - c.host_margin, 1.0) : 0;  // 0: unknown
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
    // --device_memory and --host_memory: the user's numbers, as given (planning for another machine)
    c.planned = o.device_memory_mib > 0, c.host_planned = o.host_memory_mib > 0;
    c.plan_device = c.planned ? o.device_memory_mib * 1048576.0 : c.device;
    c.plan_host = c.host_planned ? o.host_memory_mib * 1048576.0 : c.host;
    return c;
}

// One rank's predicted reserved bytes: device, host and disk arenas (of the
// fullest pipeline stage, each).
inline void rank_need(const MemoryQuery& q, double& dev, double& host, double* disk = nullptr) {
    dev = host = 0;
    if (disk) *disk = 0;
    for (int s = 0; s < q.pp(); s++) {
        MemoryPrediction p = predict_memory(q.at_stage(s), SHARD_ALIGN);
        dev = std::max(dev, (double)p.reserved.total(Arena::Device));
        host = std::max(host, (double)p.reserved.total(Arena::Host));
        if (disk) *disk = std::max(*disk, (double)p.reserved.total(Arena::Disk));
    }
}

// The plan: does one rank fit one device of the planned size (and its host part the host)?
inline bool plan_fits(const MemoryQuery& q, const MemoryCapacity& cap) {
    double dev, host, disk;
    rank_need(q, dev, host, &disk);
    if (cap.plan_disk > 0 && disk > cap.plan_disk) return false;
    if (cap.plan_host <= 0 && !cap.planned) return true;  // unknown: do not guess
    if (cap.shared && !cap.planned) return dev + host <= cap.plan_device;
    return dev <= cap.plan_device && (cap.plan_host <= 0 || host <= cap.plan_host);
}

// This machine: do the `ranks` ranks of this process fit what it really has?
inline bool machine_fits(const MemoryQuery& q, int ranks, const MemoryCapacity& cap) {
    double dev, host, disk;
    rank_need(q, dev, host, &disk);
    if (cap.disk > 0 && ranks * disk > cap.disk) return false;
    if (cap.host <= 0) return true;
    return cap.shared ? ranks * (dev + host) <= cap.host : ranks * dev <= cap.device && ranks * host <= cap.host;
}

// A change of the run that the advice may suggest, and what it costs in speed
// (a rough order: more communication, then recomputation, then host traffic).
struct FitOption {
    std::string flags;
    MemoryQuery q;
    int cost = 0;
    double dev = 0, host = 0, disk = 0;
    double seconds = 0;  // a step's predicted time, where a profile ranks them (zero/run/predict_report.h)
};

// Every combination of stage, micro-batch (same tokens per step), recomputation
// and offload at least as frugal as q's, cheapest first, that passes `ok`.
// (Offload's gradient shard on the device spares the host, not the device.)
template <typename Ok>
std::vector<FitOption> fitting_options(const MemoryQuery& q, Ok ok) {
    std::vector<FitOption> out;
    for (int z = q.stage; z <= 3; z++)
        for (int b = q.micro_batch; b >= 1; b /= 2) {
            if (q.micro_batch % b != 0) continue;
            for (int r = q.recompute; r <= 2; r++)
                for (int off = 0; off <= 4; off++)  // none, optimizer, optimizer + parameters; 3, 4: those with the states on disk
                    for (int more = 0; more < 4; more++) {  // activations offloaded (1), the gradient shard on the device (2)
                        const bool act = more & 1, acc = more & 2;
                        MemoryQuery a = q;
                        a.stage = z, a.micro_batch = b, a.micro_steps = q.micro_steps * (q.micro_batch / b);
                        a.recompute = r;
                        a.offload_optimizer = q.offload_optimizer || off >= 1;
                        a.offload_param = q.offload_param || off == 2 || off == 4;
                        const bool nvme = off >= 3 && !q.offload_nvme;  // the host is the bound: the states to disk
                        if (off >= 3 && q.offload_nvme) continue;
                        a.offload_nvme = q.offload_nvme || nvme;
                        a.offload_activations = q.offload_activations || act;
                        a.offload_grad_accum_device = q.offload_grad_accum_device || acc;
                        if ((a.offload_optimizer && z == 0) || (a.offload_param && z != 3) ||
                            (a.offload_activations && r != 2) || (a.offload_param && a.offload_delay) ||
                            (acc && (!a.offload_optimizer || z < 2)))
                            continue;  // not a valid run
                        if (off == 1 && q.offload_optimizer) continue;
                        if ((off == 2 || off == 4) && q.offload_param) continue;
                        // on disk: the largest host share that fits, in quarters
                        if (nvme) {
                            bool found = false;
                            for (double f : {0.25, 0.5, 0.75, 1.0})
                                if (!found) a.nvme_fraction = f, found = ok(a);
                        }
                        if ((act && q.offload_activations) || (acc && q.offload_grad_accum_device)) continue;
                        FitOption f{.q = a};
                        int halvings = 0;
                        for (int k = q.micro_batch / b; k > 1; k /= 2) halvings++;
                        f.cost = (z - q.stage) + (z == 3 && q.stage < 3 ? 1 : 0) + halvings +
                                 (r > q.recompute ? (r == 1 ? 1 : 3) - (q.recompute == 1 ? 1 : 0) : 0) +
                                 (a.offload_optimizer && !q.offload_optimizer ? 4 : 0) +
                                 (a.offload_param && !q.offload_param ? 4 : 0) + (nvme ? 2 : 0) +
                                 (a.offload_activations && !q.offload_activations ? 2 : 0) + (acc ? 1 : 0);
                        if (f.cost == 0 || !ok(a)) continue;
                        rank_need(a, f.dev, f.host, &f.disk);
                        std::string fl;
                        if (z != q.stage) fl += " -z " + std::to_string(z);
                        if (b != q.micro_batch)
                            fl += " -b " + std::to_string(b) + " (x" + std::to_string(a.micro_steps) + " micro-steps)";
                        if (r != q.recompute) fl += " -r " + std::to_string(r);
                        if (a.offload_optimizer != q.offload_optimizer || nvme) {
                            fl += std::string(" --offload_optimizer ") + (a.offload_nvme ? "nvme --nvme_path DIR" : "cpu");
                            if (nvme && a.nvme_fraction < 1) fl += strf(" --nvme_fraction %g", a.nvme_fraction);
                        }
                        if (a.offload_param != q.offload_param) fl += " --offload_param cpu";
                        if (a.offload_activations != q.offload_activations) fl += " --offload_activations 1";
                        if (acc) fl += " --offload_grad_accum device";
                        f.flags = fl.substr(1);
                        out.push_back(f);
                    }
        }
    std::stable_sort(out.begin(), out.end(), [](const FitOption& a, const FitOption& b) {
        return a.cost != b.cost ? a.cost < b.cost : a.dev + a.host < b.dev + b.host;
    });
    return out;
}

// The fewest pipeline stages (doubling, the data- and tensor-parallel ranks
// kept: stages times the ranks) at which `ok` holds; 0 if none up to one layer
// per stage.
template <typename Ok>
int fitting_pipeline(const MemoryQuery& q, Ok ok) {
    for (int P = 2 * q.pp(); P <= q.cfg.num_layers; P *= 2) {
        MemoryQuery a = q;
        a.pp_layers = even_pipeline_plan(q.cfg.num_layers, P).layers;
        if (ok(a)) return P;
    }
    return 0;
}

inline void print_pipeline_option(const MemoryQuery& q, int P, int ranks) {
    if (P == 0) return;
    MemoryQuery a = q;
    a.pp_layers = even_pipeline_plan(q.cfg.num_layers, P).layers;
    double dev, host;
    rank_need(a, dev, host);
    printf("  or on %d times the devices: --pp %d (%d ranks; layers per stage %s): device %.2f GiB, host %.2f GiB "
           "(the fullest stage)\n",
           P / q.pp(), P, ranks / q.pp() * P, PipelinePlan{a.pp_layers}.text().c_str(), dev / GiB, host / GiB);
}

constexpr int FIT_OPTIONS_SHOWN = 4;

inline void print_fit_options(const std::vector<FitOption>& options, const char* what) {
    if (options.empty()) {
        printf("  no combination of stage, micro-batch, recompute and offload makes %s fit\n", what);
        return;
    }
    printf("  these would make %s fit (cheapest first; all keep the tokens per step; memory per rank):\n", what);
    for (size_t i = 0; i < options.size() && i < (size_t)FIT_OPTIONS_SHOWN; i++)
        printf("    %-62s device %8.2f GiB, host %8.2f GiB%s\n", options[i].flags.c_str(), options[i].dev / GiB,
               options[i].host / GiB, options[i].disk > 0 ? (", disk " + gib_text(options[i].disk)).c_str() : "");
}

// Both answers, one line each; true if the plan fits (the machine answered apart).
inline bool print_fit_answers(const TrainOptions& o, const RunSetup& run) {
    MemoryCapacity cap = memory_capacity(o);
    MemoryQuery q = run.memory_query(o);
    const int ranks = run.ranks_per_process;
    double dev, host, disk;
    rank_need(q, dev, host, &disk);
    bool plan = plan_fits(q, cap), machine = machine_fits(q, ranks, cap);
    if (q.offload_nvme)
        printf("per rank: %s of optimizer states on disk; %s has %s free for them%s\n", gib_text(disk).c_str(),
               o.disk_memory_mib > 0 ? "the planned disk (--disk_memory)" : o.nvme_path.c_str(),
               cap.plan_disk > 0 ? gib_text(cap.plan_disk).c_str() : "an unknown amount",
               cap.plan_disk > 0 && disk * (o.disk_memory_mib > 0 ? 1 : ranks) > cap.plan_disk ? ": does NOT fit" : "");
    const std::string planned_host =
        cap.host_planned ? " and a host of " + gib_text(cap.plan_host) + " (--host_memory)" : "";
    printf("per rank: %.2f GiB device + %.2f GiB host, on a device of %.2f GiB (%s)%s: %s\n", dev / GiB, host / GiB,
           cap.plan_device / GiB, cap.planned ? "--device_memory" : cap.device_what.c_str(), planned_host.c_str(),
           plan ? "fits" : "does NOT fit");
    if (ranks > 1 || cap.planned)
        printf("this machine hosting %d rank(s): %.2f GiB %s, has %.2f GiB%s: %s\n", ranks,
               ranks * (cap.shared ? dev + host : dev) / GiB, cap.shared ? "of RAM" : "on the device",
               (cap.shared ? cap.host : cap.device) / GiB, cap.shared ? "" : " (the host too)",
               machine ? "fits" : "does NOT fit");
    return plan;
}

// --estimate 1: both answers, and the advice where the plan does not fit.
inline bool estimate_fit(const TrainOptions& o, const RunSetup& run) {
    bool plan = print_fit_answers(o, run);
    MemoryCapacity cap = memory_capacity(o);
    if (!plan) {
        const MemoryQuery q = run.memory_query(o);
        auto ok = [&](const MemoryQuery& a) { return plan_fits(a, cap); };
        print_fit_options(fitting_options(q, ok), "each rank");
        print_pipeline_option(q, fitting_pipeline(q, ok), run.world);
    }
    return plan;
}

inline void refuse_if_too_big(const TrainOptions& o, const RunSetup& run) {
    MemoryCapacity cap = memory_capacity(o);
    MemoryQuery q = run.memory_query(o);
    const int ranks = run.ranks_per_process;
    if (plan_fits(q, cap) && machine_fits(q, ranks, cap)) return;
    double dev, host;
    rank_need(q, dev, host);
    printf("this run does not fit:\n");
    print_fit_answers(o, run);
    if (cap.shared) printf("  (this machine's RAM: %.2f GiB available after a %.2f GiB margin)\n", cap.host / GiB,
                           cap.host_margin / GiB);
    else printf("  (the device: %.2f GiB, %s of %.2f GiB; the host %.2f GiB available after a %.2f GiB margin)\n",
                cap.device / GiB, cap.device_what.c_str(), cap.device_margin / GiB, cap.host / GiB, cap.host_margin / GiB);
    print_fit_options(fitting_options(q, [&](const MemoryQuery& a) { return plan_fits(a, cap) && machine_fits(a, ranks, cap); }),
                      "this run");
    print_pipeline_option(q, fitting_pipeline(q, [&](const MemoryQuery& a) {
        return plan_fits(a, cap) && machine_fits(a, ranks / q.pp() * a.pp(), cap);
    }), run.world);
    fflush(stdout);  // the explanation before the one-line error on stderr
    fail("predicted out of memory: each rank needs %.2f GiB device + %.2f GiB host%s (see above)", dev / GiB, host / GiB,
         plan_fits(q, cap) ? "; it fits the planned device, but this machine cannot host all its ranks" : "");
}
