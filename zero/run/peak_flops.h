// The measured peak of this machine's matmuls in the compute dtype (the
// denominator of MFU): a large square matmul through the same kernel the model
// uses (cuBLASLt on the GPU, gemm_cpu on the CPU build), best of a few runs.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "zero/base/common.h"
#include "zero/base/dtype.h"
#include "zero/base/rng.h"

template <typename T>
double measure_matmul_peak_flops(const KernelCtx& ctx, int n) {
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
    for (int rep = 0; rep < 4; rep++) {
        stream_sync(ctx.stream);
        HostClock clock;
        matmul_forward(ctx, c, a, b, (const T*)nullptr, n, n, n, (T*)nullptr);
        stream_sync(ctx.stream);
        double s = clock.seconds();
        if (rep > 0) best = std::max(best, 2.0 * n * n * (double)n / s);  // the first run warms up
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
    char buf[32];
    snprintf(buf, sizeof(buf), "%.1f %s", flops, units[u]);
    return buf;
}
