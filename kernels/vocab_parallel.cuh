// The vocabulary-parallel embedding and cross-entropy on the GPU (tensor
// parallelism): a rank of a tensor group holds Vl = Vp/t consecutive rows of
// wte from padded-vocabulary row v0, and so Vl columns of the logits. The
// collectives between the kernels are the model's (zero/model/vocab_parallel.h);
// the CPU twins, whose per-element math these kernels share, are
// kernels/cpu/vocab_parallel.h.
//
// Embedding forward: encoder_forward's grid-stride pack loop, with rows of
// tokens this rank does not hold read as zeros and wpe added on one rank only.
// Embedding backward: encoder.cuh's deterministic bucketing restricted to the
// tokens in [v0, v0+Vl) (the same summation order as the CPU twin: the same bits).
// Loss: one block per row, fp32, block reductions; the padding columns never
// enter the loss and become zeros in the dlogits.
#pragma once

#include "kernels/cpu/vocab_parallel.h"
#include "kernels/cuda_common.cuh"
#include "kernels/encoder.cuh"

constexpr int VOCAB_PARALLEL_THREADS = 512;

// ----------------------------------------------------------------------------
// embedding

template <typename T, bool VEC>
__global__ void encoder_forward_vocab_kernel(T* __restrict__ out, const int* __restrict__ tokens,
                                             const T* __restrict__ wte_local, const T* __restrict__ wpe, int BT,
                                             int T_, int C, int v0, int Vl, bool add_wpe) {
    constexpr int X = VEC ? Packed128<T>::size : 1;
    const int packs_per_row = C / X;
    const size_t total = (size_t)BT * packs_per_row;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += stride) {
        const int bt = (int)(p / packs_per_row);
        const int c = (int)(p % packs_per_row) * X;
        const int t = bt % T_;
        const int v = __ldg(tokens + bt) - v0;
        const bool mine = v >= 0 && v < Vl;
        const T* wt = wte_local + (size_t)(mine ? v : 0) * C + c;
        const T* wp = wpe + (size_t)t * C + c;
        if constexpr (VEC) {
            Packed128<T> a = mine ? load128ro(wt) : Packed128<T>::zeros();
            Packed128<T> b = add_wpe ? load128ro(wp) : Packed128<T>::zeros();
            Packed128<T> o;
#pragma unroll
            for (int k = 0; k < X; k++) o.set(k, encoder_vocab_value(mine, a.get(k), add_wpe, b.get(k)));
            store128(out + (size_t)bt * C + c, o);
        } else {
            const float a = mine ? to_float(*wt) : 0.0f, b = add_wpe ? to_float(*wp) : 0.0f;
            out[(size_t)bt * C + c] = from_float<T>(encoder_vocab_value(mine, a, add_wpe, b));
        }
    }
}

// out (B,T,C) = this rank's part of wte[tokens] (+ wpe[t] when add_wpe); tokens on the device
template <typename T>
void encoder_forward_vocab_cuda(const KernelCtx& ctx, T* out, const int* tokens, const T* wte_local, const T* wpe,
                                int B, int T_, int C, int v0, int Vl, bool add_wpe) {
    const int BT = B * T_;
    if (BT == 0) return;
    const int block = 256;
    constexpr int X = Packed128<T>::size;
    if (C % X == 0 && aligned16(out) && aligned16(wte_local) && aligned16(wpe)) {
        encoder_forward_vocab_kernel<T, true><<<grid_for((size_t)BT * (C / X), block), block, 0, ctx.stream>>>(
            out, tokens, wte_local, wpe, BT, T_, C, v0, Vl, add_wpe);
    } else {
        encoder_forward_vocab_kernel<T, false><<<grid_for((size_t)BT * C, block), block, 0, ctx.stream>>>(
            out, tokens, wte_local, wpe, BT, T_, C, v0, Vl, add_wpe);
    }
    cudaLaunchCheck();
}

// dwte_local (Vl,C) += rows of the tokens in [v0, v0+Vl); dwpe (maxT,C) += every position's
// (split: the encoder backward's split runs, kernels/encoder.cuh)
template <typename T>
void encoder_backward_vocab_cuda(const KernelCtx& ctx, T* dwte_local, T* dwpe, const T* dout, const int* tokens_host,
                                 int B, int T_, int C, int v0, int Vl, int split) {
    encoder_backward_range_cuda(ctx, dwte_local, dwpe, dout, tokens_host, B, T_, C, v0, Vl, split);
}

// ----------------------------------------------------------------------------
// cross-entropy, three phases around the collectives

// Phase 1, block per row: max over the real columns (-inf when none), and the
// target's logit when this rank holds its column (else 0).
template <typename T>
__global__ void __launch_bounds__(VOCAB_PARALLEL_THREADS)
    vocab_parallel_local_stats_kernel(float* __restrict__ row_max, float* __restrict__ target_logit,
                                      const T* __restrict__ logits, const int* __restrict__ targets, int Vl, int v0,
                                      int V) {
    const int i = blockIdx.x;
    const T* row = logits + (size_t)i * Vl;
    const int real = vocab_real_columns(V, v0, Vl);
    float m = -INFINITY;
    for (int v = threadIdx.x; v < real; v += blockDim.x) m = fmaxf(m, to_float(row[v]));
    m = block_reduce_max(m);
    if (threadIdx.x == 0) {
        row_max[i] = m;
        const int tv = targets[i] - v0;
        target_logit[i] = tv >= 0 && tv < Vl ? to_float(row[tv]) : 0.0f;
    }
}

// Phase 2, block per row: the global max from the gathered (t, BT) maxima, and
// this rank's sum of exp(logit - max) over its real columns.
template <typename T>
__global__ void __launch_bounds__(VOCAB_PARALLEL_THREADS)
    vocab_parallel_sum_exp_kernel(float* __restrict__ global_max, float* __restrict__ sum_exp,
                                  const float* __restrict__ gathered, const T* __restrict__ logits, int t, int BT,
                                  int Vl, int v0, int V) {
    const int i = blockIdx.x;
    float m = -INFINITY;
    for (int k = 0; k < t; k++) m = fmaxf(m, gathered[(size_t)k * BT + i]);
    const T* row = logits + (size_t)i * Vl;
    const int real = vocab_real_columns(V, v0, Vl);
    float s = 0.0f;
    for (int v = threadIdx.x; v < real; v += blockDim.x) s += expf(to_float(row[v]) - m);
    s = block_reduce_sum(s);
    if (threadIdx.x == 0) {
        global_max[i] = m;
        sum_exp[i] = s;
    }
}

// Phase 3, block per row: the loss (every rank alike) and, when dloss != 0,
// this rank's dlogits in place: real columns (softmax - onehot) * dloss, padding 0.
template <typename T>
__global__ void __launch_bounds__(VOCAB_PARALLEL_THREADS)
    vocab_parallel_finish_kernel(T* logits, float* __restrict__ losses, const int* __restrict__ targets,
                                 const float* __restrict__ global_max, const float* __restrict__ sum_exp,
                                 const float* __restrict__ target_logit, int Vl, int v0, int V, float dloss) {
    const int i = blockIdx.x;
    const float m = global_max[i], sum = sum_exp[i];
    if (threadIdx.x == 0) losses[i] = vocab_parallel_loss(m, sum, target_logit[i]);
    if (dloss == 0.0f) return;
    T* row = logits + (size_t)i * Vl;
    const int real = vocab_real_columns(V, v0, Vl);
    const float scale = dloss / sum;
    const int tv = targets[i] - v0;
    for (int v = threadIdx.x; v < Vl; v += blockDim.x) {
        const float g = v < real ? vocab_parallel_dlogit(to_float(row[v]), m, scale, v == tv, dloss) : 0.0f;
        row[v] = from_float<T>(g);
    }
}

template <typename T>
void vocab_parallel_local_stats_cuda(const KernelCtx& ctx, float* row_max, float* target_logit, const T* logits,
                                     const int* targets, int BT, int Vl, int v0, int V) {
    if (BT == 0) return;
    vocab_parallel_local_stats_kernel<T>
        <<<BT, VOCAB_PARALLEL_THREADS, 0, ctx.stream>>>(row_max, target_logit, logits, targets, Vl, v0, V);
    cudaLaunchCheck();
}

template <typename T>
void vocab_parallel_sum_exp_cuda(const KernelCtx& ctx, float* global_max, float* sum_exp, const float* gathered,
                                 const T* logits, int t, int BT, int Vl, int v0, int V) {
    if (BT == 0) return;
    vocab_parallel_sum_exp_kernel<T>
        <<<BT, VOCAB_PARALLEL_THREADS, 0, ctx.stream>>>(global_max, sum_exp, gathered, logits, t, BT, Vl, v0, V);
    cudaLaunchCheck();
}

template <typename T>
void vocab_parallel_finish_cuda(const KernelCtx& ctx, T* logits, float* losses, const int* targets,
                                const float* global_max, const float* sum_exp, const float* target_logit, int BT,
                                int Vl, int v0, int V, float dloss) {
    if (BT == 0) return;
    vocab_parallel_finish_kernel<T><<<BT, VOCAB_PARALLEL_THREADS, 0, ctx.stream>>>(
        logits, losses, targets, global_max, sum_exp, target_logit, Vl, v0, V, dloss);
    cudaLaunchCheck();
}
