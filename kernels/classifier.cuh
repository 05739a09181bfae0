// Fused classifier on the GPU: softmax + cross-entropy + dlogits, one block
// per row of the (BT, Vp) logits, never storing probabilities (kernels/cpu/
// classifier.h is the reference).
//
// Pass 1 reads the row once with 128-bit loads; each thread keeps an online
// (running max, sum of exp(x - max)) pair over its packs, rescaling its sum
// when its max grows; the block combines the pairs (max first, then the
// rescaled sums) into lse = max + log(sum). loss = lse - logit[target].
// Pass 2 (only when dloss != 0) re-reads the row, which is still in L2 from
// pass 1 for the blocks in flight, and overwrites it in place with
// (exp(x - lse) - [v == target]) * dloss for v < V and 0 for v >= V.
// Padding columns are never read for the loss.
// FAST (ZERO_VARIANTS=fast_exp_classifier): every exponential of both passes
// with __expf, the hardware's approximation (a few ulp), instead of expf.
#pragma once

#include "kernels/cuda_common.cuh"

constexpr int CLASSIFIER_THREADS = 1024;

template <bool FAST>
__device__ __forceinline__ float classifier_exp(float x) {
    if constexpr (FAST) return __expf(x);
    else return expf(x);
}

template <typename T, bool VEC, bool FAST>
__global__ void __launch_bounds__(CLASSIFIER_THREADS)
    fused_classifier_kernel(T* logits, float* __restrict__ losses, const int* __restrict__ targets, int V, int Vp,
                            float dloss) {
    constexpr int X = VEC ? Packed128<T>::size : 1;
    const int row = blockIdx.x;
    T* x = logits + (size_t)row * Vp;
    const int target = targets[row];
    float target_logit = 0.0f;
    if (threadIdx.x == 0) target_logit = to_float(x[target]);  // read before anything is overwritten

    // pass 1: online max / sum over the valid columns [0, V)
    const int npacks = cdiv(V, X);
    float m = -INFINITY, s = 0.0f;
#pragma unroll 4
    for (int j = threadIdx.x; j < npacks; j += blockDim.x) {
        float v[X];
        if constexpr (VEC) {
            Packed128<T> p = load128(x + (size_t)j * X);
#pragma unroll
            for (int e = 0; e < X; e++) v[e] = j * X + e < V ? p.get(e) : -INFINITY;
        } else {
            v[0] = to_float(x[j]);
        }
        float pm = v[0];
#pragma unroll
        for (int e = 1; e < X; e++) pm = fmaxf(pm, v[e]);
        if (pm > m) {
            s = m == -INFINITY ? 0.0f : s * classifier_exp<FAST>(m - pm);
            m = pm;
        }
#pragma unroll
        for (int e = 0; e < X; e++)
            if (j * X + e < V) s += classifier_exp<FAST>(v[e] - m);
    }
    const float M = block_reduce_max(m);
    const float S = block_reduce_sum(m == -INFINITY ? 0.0f : s * classifier_exp<FAST>(m - M));
    const float lse = M + logf(S);
    if (threadIdx.x == 0) losses[row] = lse - target_logit;
    if (dloss == 0.0f) return;

    // pass 2: dlogits in place
    const int nall = Vp / X;
#pragma unroll 4
    for (int j = threadIdx.x; j < nall; j += blockDim.x) {
        if constexpr (VEC) {
            const int v0 = j * X;
            Packed128<T> p = v0 < V ? load128cs(x + (size_t)v0) : Packed128<T>::zeros();
            Packed128<T> o;
#pragma unroll
            for (int e = 0; e < X; e++) {
                const int v = v0 + e;
                float g = 0.0f;
                if (v < V) g = (classifier_exp<FAST>(p.get(e) - lse) - (v == target ? 1.0f : 0.0f)) * dloss;
                o.set(e, g);
            }
            store128(x + (size_t)v0, o);
        } else {
            float g = 0.0f;
            if (j < V) g = (classifier_exp<FAST>(to_float(x[j]) - lse) - (j == target ? 1.0f : 0.0f)) * dloss;
            x[j] = from_float<T>(g);
        }
    }
}

// logits (BT,Vp) in, dlogits out when dloss != 0; losses (BT); targets (BT) in [0, V)
template <typename T>
void fused_classifier_cuda(const KernelCtx& ctx, T* logits, float* losses, const int* targets, int BT, int V, int Vp,
                           float dloss, bool fast_exp) {
    if (BT == 0) return;
    constexpr int X = Packed128<T>::size;
    const bool vec = Vp % X == 0 && aligned16(logits);
    auto kernel = vec ? (fast_exp ? fused_classifier_kernel<T, true, true> : fused_classifier_kernel<T, true, false>)
                      : (fast_exp ? fused_classifier_kernel<T, false, true> : fused_classifier_kernel<T, false, false>);
    kernel<<<BT, CLASSIFIER_THREADS, 0, ctx.stream>>>(logits, losses, targets, V, Vp, dloss);
    cudaLaunchCheck();
}
