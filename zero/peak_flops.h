// The measured peak of this machine's matmuls in the compute dtype (the
// denominator of MFU): a large square matmul through the same kernel the model
// uses (cuBLASLt on the GPU, gemm_cpu on the CPU build), best of a few runs.
#pragma once

#include <chrono>

#include "kernels/kernels.h"

template <typename T>
double measure_matmul_peak_flops(const KernelCtx& ctx, int n) {
    size_t elems = (size_t)n * n;
    T* a = (T*)device_malloc(elems * sizeof(T));
    T* b = (T*)device_malloc(elems * sizeof(T));
    T* c = (T*)device_malloc(elems * sizeof(T));
    device_zero(a, elems * sizeof(T), ctx.stream);  // zeros: the timing does not depend on values
    device_zero(b, elems * sizeof(T), ctx.stream);
    double best = 0.0;
    for (int rep = 0; rep < 4; rep++) {
        stream_sync(ctx.stream);
        auto t0 = std::chrono::steady_clock::now();
        matmul_forward(ctx, c, a, b, (const T*)nullptr, n, n, n, (T*)nullptr);
        stream_sync(ctx.stream);
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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
