// LayerNorm on the GPU: forward, fused residual-add + forward, backward, and
// the plain residual add. Same semantics as kernels/cpu/layernorm.h: fp32
// statistics (two-pass mean and variance, eps = 1e-5), every output rounded
// to T once, the fused residual is rounded to T before it is normalised.
//
// Forward: one warp per row. Each lane owns the 128-bit packs j = lane + 32k
// (k < P) of the row and keeps them in registers as fp32, so the row is read
// from memory once: P is a template parameter picked from C on the host.
//
// Backward: one warp per row as well, rows dealt out round-robin over a fixed
// grid of warps. dinp accumulates in place (each element has one owner).
// dweight/dbias: every warp keeps fp32 column sums for its rows in its own
// slice of shared memory, where each channel belongs to one lane, so no
// atomics; at the end the block adds its warps' slices in warp
// order into one row of partial sums in ctx.workspace, and a second kernel
// adds the partial rows in order (finish_column_partials). The grid depends
// only on (N, C), so the result is bitwise reproducible.
//
// Shapes or alignments the packed kernels cannot take (C not a multiple of
// the pack, unaligned pointers, very wide rows) go to scalar versions of the
// same kernels that re-read the row from memory instead of keeping it.
#pragma once

#include "kernels/cuda_common.cuh"

constexpr float LN_EPS_DEV = 1e-5f;  // LAYERNORM_EPS of the CPU twin
constexpr int LN_FWD_WARPS = 4;      // rows per forward block

// Register-cached packs per lane the packed kernels are compiled for; a row of
// npacks packs uses the smallest P with 32*P >= npacks (lanes mask the rest).
inline int ln_pick_packs(int npacks) {
    static const int choices[] = {1, 2, 3, 4, 6, 8, 12, 16};
    for (int p : choices)
        if (32 * p >= npacks) return p;
    return 0;  // too wide: scalar kernel
}

// ----------------------------------------------------------------------------
// forward

// out (N,C), mean/rstd (N) from inp (N,C); with RESID, inp = inp1 + inp2 rounded
// to T and also written to residual (N,C).
template <typename T, int P, bool RESID>
__global__ void __launch_bounds__(LN_FWD_WARPS * 32)
    layernorm_forward_kernel(T* __restrict__ residual, T* __restrict__ out, float* __restrict__ mean,
                             float* __restrict__ rstd, const T* __restrict__ inp1, const T* __restrict__ inp2,
                             const T* __restrict__ weight, const T* __restrict__ bias, int N, int C) {
    constexpr int X = Packed128<T>::size;
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * LN_FWD_WARPS + threadIdx.x / 32;
    if (row >= N) return;
    const int npacks = C / X;
    const size_t base = (size_t)row * C;

    float x[P][X];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int j = lane + 32 * k;
        if (j < npacks) {
            Packed128<T> v;
            if constexpr (RESID) {
                Packed128<T> a = load128cs(inp1 + base + (size_t)j * X);
                Packed128<T> b = load128cs(inp2 + base + (size_t)j * X);
#pragma unroll
                for (int e = 0; e < X; e++) v.set(e, a.get(e) + b.get(e));
                store128(residual + base + (size_t)j * X, v);
            } else {
                v = load128cs(inp1 + base + (size_t)j * X);
            }
#pragma unroll
            for (int e = 0; e < X; e++) {
                x[k][e] = v.get(e);
                sum += x[k][e];
            }
        } else {
#pragma unroll
            for (int e = 0; e < X; e++) x[k][e] = 0.0f;
        }
    }
    const float m = warp_reduce_sum(sum) / C;
    float var = 0.0f;
#pragma unroll
    for (int k = 0; k < P; k++) {
        if (lane + 32 * k < npacks) {
#pragma unroll
            for (int e = 0; e < X; e++) {
                float d = x[k][e] - m;
                var += d * d;
            }
        }
    }
    var = warp_reduce_sum(var) / C;
    const float s = 1.0f / sqrtf(var + LN_EPS_DEV);
#pragma unroll
    for (int k = 0; k < P; k++) {
        const int j = lane + 32 * k;
        if (j < npacks) {
            Packed128<T> w = load128ro(weight + (size_t)j * X);
            Packed128<T> b = load128ro(bias + (size_t)j * X);
            Packed128<T> o;
#pragma unroll
            for (int e = 0; e < X; e++) o.set(e, (x[k][e] - m) * s * w.get(e) + b.get(e));
            store128(out + base + (size_t)j * X, o);
        }
    }
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

// Scalar version: lane owns channels c = lane + 32k and re-reads them (its own
// writes, for the residual) in each pass.
template <typename T, bool RESID>
__global__ void __launch_bounds__(LN_FWD_WARPS * 32)
    layernorm_forward_scalar_kernel(T* residual, T* out, float* mean, float* rstd, const T* inp1, const T* inp2,
                                    const T* weight, const T* bias, int N, int C) {
    const int lane = threadIdx.x % 32;
    const int row = blockIdx.x * LN_FWD_WARPS + threadIdx.x / 32;
    if (row >= N) return;
    const size_t base = (size_t)row * C;
    const T* x = inp1 + base;
    if constexpr (RESID) {
        for (int c = lane; c < C; c += 32)
            residual[base + c] = from_float<T>(to_float(inp1[base + c]) + to_float(inp2[base + c]));
        x = residual + base;
    }
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += to_float(x[c]);
    const float m = warp_reduce_sum(sum) / C;
    float var = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = to_float(x[c]) - m;
        var += d * d;
    }
    var = warp_reduce_sum(var) / C;
    const float s = 1.0f / sqrtf(var + LN_EPS_DEV);
    for (int c = lane; c < C; c += 32)
        out[base + c] = from_float<T>((to_float(x[c]) - m) * s * to_float(weight[c]) + to_float(bias[c]));
    if (lane == 0) {
        mean[row] = m;
        rstd[row] = s;
    }
}

template <typename T, bool RESID>
void layernorm_forward_launch(const KernelCtx& ctx, T* residual, T* out, float* mean, float* rstd, const T* inp1,
                              const T* inp2, const T* weight, const T* bias, int N, int C) {
    if (N == 0) return;
    constexpr int X = Packed128<T>::size;
    const unsigned grid = cdiv(N, LN_FWD_WARPS);
    const int block = LN_FWD_WARPS * 32;
    bool vec = C % X == 0 && aligned16(out) && aligned16(inp1) && aligned16(weight) && aligned16(bias);
    if (RESID) vec = vec && aligned16(inp2) && aligned16(residual);
    const int P = vec ? ln_pick_packs(C / X) : 0;
#define ZERO_LN_FWD_CASE(PP)                                                                                     \
    case PP:                                                                                                     \
        layernorm_forward_kernel<T, PP, RESID>                                                                   \
            <<<grid, block, 0, ctx.stream>>>(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C);        \
        break;
    switch (P) {
        ZERO_LN_FWD_CASE(1)
        ZERO_LN_FWD_CASE(2)
        ZERO_LN_FWD_CASE(3)
        ZERO_LN_FWD_CASE(4)
        ZERO_LN_FWD_CASE(6)
        ZERO_LN_FWD_CASE(8)
        ZERO_LN_FWD_CASE(12)
        ZERO_LN_FWD_CASE(16)
        default:
            layernorm_forward_scalar_kernel<T, RESID>
                <<<grid, block, 0, ctx.stream>>>(residual, out, mean, rstd, inp1, inp2, weight, bias, N, C);
    }
#undef ZERO_LN_FWD_CASE
    cudaLaunchCheck();
}

template <typename T>
void layernorm_forward_cuda(const KernelCtx& ctx, T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C) {
    layernorm_forward_launch<T, false>(ctx, (T*)nullptr, out, mean, rstd, inp, (const T*)nullptr, weight, bias, N, C);
}

template <typename T>
void residual_layernorm_forward_cuda(const KernelCtx& ctx, T* residual, T* out, float* mean, float* rstd,
                                     const T* inp1, const T* inp2, const T* weight, const T* bias, int N, int C) {
    layernorm_forward_launch<T, true>(ctx, residual, out, mean, rstd, inp1, inp2, weight, bias, N, C);
}

// ----------------------------------------------------------------------------
// residual add: out (n) = a + b

template <typename T, bool VEC>
__global__ void residual_forward_kernel(T* out, const T* a, const T* b, size_t n) {
    constexpr int X = Packed128<T>::size;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (VEC) {
        const size_t npack = n / X;
        for (size_t p = tid; p < npack; p += stride) {
            Packed128<T> x = load128cs(a + p * X);
            Packed128<T> y = load128cs(b + p * X);
            Packed128<T> o;
#pragma unroll
            for (int k = 0; k < X; k++) o.set(k, x.get(k) + y.get(k));
            store128(out + p * X, o);
        }
        done = npack * X;
    }
    for (size_t i = done + tid; i < n; i += stride) out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}

template <typename T>
void residual_forward_cuda(const KernelCtx& ctx, T* out, const T* a, const T* b, size_t n) {
    if (n == 0) return;
    const int block = 256;
    if (aligned16(out) && aligned16(a) && aligned16(b)) {
        residual_forward_kernel<T, true>
            <<<grid_for(n / Packed128<T>::size + 1, block), block, 0, ctx.stream>>>(out, a, b, n);
    } else {
        residual_forward_kernel<T, false><<<grid_for(n, block), block, 0, ctx.stream>>>(out, a, b, n);
    }
    cudaLaunchCheck();
}

// ----------------------------------------------------------------------------
// backward

// Shared-memory accumulators. Each warp has S slots for dweight and S for
// dbias. In the packed kernel, element e of lane L's k-th pack (channel
// (32k + L) * X + e) lives in slot (k * X + e) * 32 + L: consecutive lanes hit
// consecutive banks (no conflicts), and every slot a lane touches is one it
// zeroed itself. S = 32 * P * X (>= C; the extra slots stay 0). The scalar
// kernel uses slot c for channel c (also lane-owned: c % 32 == lane).
inline int ln_bwd_slots(int C, int P, int X) { return P > 0 ? 32 * P * X : C; }
// Warps per block: up to max_warps, within ~100 KiB of shared memory.
inline int ln_bwd_warps(int slots, int max_warps = LN_BWD_MAX_WARPS) {
    long w = (100L * 1024) / (2L * slots * (long)sizeof(float));
    return (int)(w < 1 ? 1 : w > max_warps ? max_warps : w);
}
// Blocks of the backward grid (= rows of partial sums), at most max_blocks.
inline int ln_bwd_blocks(int N, int warps, int max_blocks = LN_BWD_BLOCKS) {
    int need = cdiv(N, warps);
    return need < max_blocks ? (need < 1 ? 1 : need) : max_blocks;
}

// P > 0: packed, register-cached rows; P == 0: scalar, re-reading.
// Dynamic shared memory: W warps x 2S floats (dweight slots, then dbias slots).
// partials: (gridDim.x, 2C): the block's dweight sums, then its dbias sums.
template <typename T, int P>
__global__ void layernorm_backward_kernel(T* dinp, float* __restrict__ partials, const T* __restrict__ dout,
                                          const T* __restrict__ inp, const T* __restrict__ weight,
                                          const float* __restrict__ mean, const float* __restrict__ rstd, int N,
                                          int C, int S) {
    extern __shared__ float ln_smem[];
    constexpr int X = P > 0 ? Packed128<T>::size : 1;
    const int W = blockDim.x / 32;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float* sdw = ln_smem + (size_t)warp * 2 * S;
    float* sdb = sdw + S;
    for (int i = lane; i < 2 * S; i += 32) sdw[i] = 0.0f;
    __syncwarp();

    const int npacks = C / X;
    const int warps_total = gridDim.x * W;
    for (int row = blockIdx.x * W + warp; row < N; row += warps_total) {
        const size_t base = (size_t)row * C;
        const float m = mean[row], s = rstd[row];
        if constexpr (P > 0) {
            // The row stays in registers as it was loaded (128-bit packs: 4 registers
            // each, 8 values of a 16-bit type), not widened to floats: at P = 16 that
            // is 192 registers instead of 320, which spilled. Each value is widened
            // again where it is used, by the same operations, so the results are the same.
            Packed128<T> dy[P], xi[P];
            Packed128<T> dx[P];  // dinp, loaded with the rest so the row costs one memory round trip
            float sum_dn = 0.0f, sum_dn_n = 0.0f;
#pragma unroll
            for (int k = 0; k < P; k++) {
                const int j = lane + 32 * k;
                if (j < npacks) {
                    dy[k] = load128cs(dout + base + (size_t)j * X);
                    xi[k] = load128cs(inp + base + (size_t)j * X);
                    dx[k] = load128cs(dinp + base + (size_t)j * X);
                    Packed128<T> w = load128ro(weight + (size_t)j * X);
#pragma unroll
                    for (int e = 0; e < X; e++) {
                        const float xn = xi[k].get(e) - m;  // (x - mean); times rstd below
                        float norm = xn * s;
                        float dn = w.get(e) * dy[k].get(e);
                        sum_dn += dn;
                        sum_dn_n += dn * norm;
                    }
                }
            }
            const float dn_mean = warp_reduce_sum(sum_dn) / C;
            const float dn_n_mean = warp_reduce_sum(sum_dn_n) / C;
#pragma unroll
            for (int k = 0; k < P; k++) {
                const int j = lane + 32 * k;
                if (j < npacks) {
                    Packed128<T> w = load128ro(weight + (size_t)j * X);
#pragma unroll
                    for (int e = 0; e < X; e++) {
                        const float dye = dy[k].get(e), xn = xi[k].get(e) - m;
                        float norm = xn * s;
                        float dn = w.get(e) * dye;
                        float g = (dn - dn_mean - norm * dn_n_mean) * s;
                        dx[k].set(e, dx[k].get(e) + g);
                        const int slot = (k * X + e) * 32 + lane;
                        sdw[slot] += dye * xn * s;
                        sdb[slot] += dye;
                    }
                    store128cs(dinp + base + (size_t)j * X, dx[k]);
                }
            }
        } else {
            float sum_dn = 0.0f, sum_dn_n = 0.0f;
            for (int c = lane; c < C; c += 32) {
                float norm = (to_float(inp[base + c]) - m) * s;
                float dn = to_float(weight[c]) * to_float(dout[base + c]);
                sum_dn += dn;
                sum_dn_n += dn * norm;
            }
            const float dn_mean = warp_reduce_sum(sum_dn) / C;
            const float dn_n_mean = warp_reduce_sum(sum_dn_n) / C;
            for (int c = lane; c < C; c += 32) {
                float xm = to_float(inp[base + c]) - m;
                float dyc = to_float(dout[base + c]);
                float norm = xm * s;
                float dn = to_float(weight[c]) * dyc;
                float g = (dn - dn_mean - norm * dn_n_mean) * s;
                dinp[base + c] = from_float<T>(to_float(dinp[base + c]) + g);
                sdw[c] += dyc * xm * s;
                sdb[c] += dyc;
            }
        }
    }
    __syncthreads();
    // this block's row of partial sums: for each slot, the warps added in warp order
    float* out = partials + (size_t)blockIdx.x * 2 * C;
    for (int i = threadIdx.x; i < S; i += blockDim.x) {
        int ch = i;
        if constexpr (P > 0) ch = ((i / 32) / X * 32 + i % 32) * X + (i / 32) % X;
        if (ch < C) {
            float tw = 0.0f, tb = 0.0f;
            for (int w = 0; w < W; w++) {
                tw += ln_smem[(size_t)w * 2 * S + i];
                tb += ln_smem[(size_t)w * 2 * S + S + i];
            }
            out[ch] = tw;
            out[C + ch] = tb;
        }
    }
}

// max_blocks, max_warps: caps on the grid. The trainer keeps the defaults (the
// workspace formula counts LN_BWD_BLOCKS rows of partials); the workbench
// sweeps them to time other grids, with a workspace of max_blocks x 2C floats.
template <typename T>
void layernorm_backward_cuda(const KernelCtx& ctx, T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             int max_blocks = LN_BWD_BLOCKS, int max_warps = LN_BWD_MAX_WARPS) {
    if (N == 0 || C == 0) return;
    constexpr int X = Packed128<T>::size;
    const bool vec = C % X == 0 && aligned16(dinp) && aligned16(dout) && aligned16(inp) && aligned16(weight);
    const int P = vec ? ln_pick_packs(C / X) : 0;
    const int S = ln_bwd_slots(C, P, X);
    const int W = ln_bwd_warps(S, max_warps);
    const int nb = ln_bwd_blocks(N, W, max_blocks);
    float* partials = (float*)workspace_take(ctx, (size_t)nb * 2 * C * sizeof(float), "layernorm_backward");
    const size_t smem = (size_t)W * 2 * S * sizeof(float);
#define ZERO_LN_BWD_CASE(PP)                                                                                   \
    case PP:                                                                                                   \
        cudaCheck(cudaFuncSetAttribute(layernorm_backward_kernel<T, PP>,                                       \
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));              \
        layernorm_backward_kernel<T, PP>                                                                       \
            <<<nb, W * 32, smem, ctx.stream>>>(dinp, partials, dout, inp, weight, mean, rstd, N, C, S);          \
        break;
    switch (P) {
        ZERO_LN_BWD_CASE(1)
        ZERO_LN_BWD_CASE(2)
        ZERO_LN_BWD_CASE(3)
        ZERO_LN_BWD_CASE(4)
        ZERO_LN_BWD_CASE(6)
        ZERO_LN_BWD_CASE(8)
        ZERO_LN_BWD_CASE(12)
        ZERO_LN_BWD_CASE(16)
        ZERO_LN_BWD_CASE(0)
    }
#undef ZERO_LN_BWD_CASE
    cudaLaunchCheck();
    finish_column_partials(ctx, dweight, dbias, C, partials, nb, 2 * C);
}
