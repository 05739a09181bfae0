// Calibration's timing (`--calibrate FILE`, zero/run/calibration.h): an
// operation the trainer ran, run again alone (time_calls); the emulated
// collectives in a world of the run's size and groups; and the ceilings the
// efficiencies are taken against, the best matmul and a device copy.
#pragma once

#include <algorithm>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "kernels/kernels.h"
#include "zero/comm/comm_emulated.h"
#include "zero/perf/op_time.h"
#include "zero/perf/peak_flops.h"
#include "zero/perf/profile.h"

namespace calibrate_detail {

inline void set_threads(int n) {
#ifdef _OPENMP
    omp_set_num_threads(std::max(1, n));
#endif
    (void)n;
}

// Seconds per call of fn: the fastest of five batches of calls, each about 20 ms
// long (another process on the machine only ever makes a batch slower). Ranks
// that time a collective together pass `agree` (every rank's time made the
// slowest's: rank 0's first timing decides the number of calls for all) and
// `start` (a barrier before each batch).
template <typename Fn, typename Sync, typename Agree = double (*)(double), typename Start = void (*)()>
double time_calls(Fn fn, Sync sync, Agree agree = [](double t) { return t; }, Start start = [] {}) {
    fn(), sync();  // warm: first touch of the buffers, library set-up
    HostClock once;
    fn(), sync();
    int reps = (int)std::min(1000.0, std::max(1.0, 0.02 / std::max(agree(once.seconds()), 1e-7)));
    double best = 1e30;
    for (int b = 0; b < 5; b++) {
        start();
        HostClock c;
        for (int i = 0; i < reps; i++) fn();
        sync();
        best = std::min(best, agree(c.seconds()) / reps);
    }
    return best;
}

// Each (op, bytes) in an emulated world of `world` ranks split into groups of `group` adjacent ranks.
template <typename T>
void time_collectives(const std::vector<std::pair<std::string, uint64_t>>& calls, int world, int group, int threads,
                      std::map<std::string, double>& out) {
    std::vector<double> seconds(calls.size());
    run_emulated_ranks(world, [&](int rank, EmulatedWorld& w) {
        set_threads(threads);
        KernelCtx ctx{.stream = stream_create(Lane::Compute)};
        EmulatedComm comm(w, rank, ctx);
        std::unique_ptr<Comm> g = comm.split(rank / group, rank % group);
        uint64_t most = 8;
        for (const auto& c : calls) most = std::max(most, c.second);
        char* buf = (char*)device_malloc(most);
        char* other = (char*)device_malloc(most);
        device_zero(buf, most, ctx.stream), device_zero(other, most, ctx.stream);
        for (size_t i = 0; i < calls.size(); i++) {
            const std::string& op = calls[i].first;
            size_t count = calls[i].second / sizeof(T), part = count / g->world;
            DType dt = dtype_of<T>::value;
            auto fn = [&] {
                if (op == "all_reduce") g->all_reduce_sum(buf, count, dt, ctx.stream);
                else if (op == "reduce_scatter") g->reduce_scatter_sum(buf, other, part, dt, ctx.stream);
                else if (op == "all_gather") g->all_gather(other, buf, part, dt, ctx.stream);
                else g->sum_scalar(1.0);
            };
            double best = time_calls(fn, [&] { stream_sync(ctx.stream); },
                                     [&](double t) { return comm.max_scalar(t); }, [&] { comm.barrier(); });
            if (rank == 0) seconds[i] = best;
        }
        device_free(buf), device_free(other);
        stream_destroy(ctx.stream);
    });
    for (size_t i = 0; i < calls.size(); i++) out[calls[i].first + " " + std::to_string(calls[i].second)] = seconds[i];
}

}  // namespace calibrate_detail

// The profile's ceilings, if it has none yet: the best matmul of this build's
// dtype and the bandwidth of a 256 MiB device copy (read plus written), with
// every core.
template <typename T>
void measure_ceilings(Profile& p, int cores) {
    using namespace calibrate_detail;
    if (p.peak_tflops > 0) return;
    set_threads(cores);
    MemoryAccountant mem(0);
    KernelCtx ctx = create_kernel_ctx(mem, 1, 64, 1);
#ifdef ZERO_CUDA
    p.peak_tflops = measure_matmul_peak_flops<T>(ctx, 8192) / 1e12;
#else
    p.peak_tflops = measure_matmul_peak_flops<T>(ctx, 1024) / 1e12;
#endif
    const size_t bytes = 256u << 20;
    char *x = (char*)device_malloc(bytes), *y = (char*)device_malloc(bytes);
    device_zero(x, bytes, ctx.stream);
    p.hbm_gbs = 2.0 * bytes / time_calls([&] { device_copy(y, x, bytes, ctx.stream); },
                                         [&] { stream_sync(ctx.stream); }) / 1e9;
    device_free(x), device_free(y);
    destroy_kernel_ctx(ctx);
}
