// Causal self-attention on the GPU, forward (kernels/attention.cuh: the
// family, its semantics and its two implementations): out (B, T, C) and lse
// (B, NH, T) from qkv (B, T, 3C).
//
//   tensor cores  one block per (b, h, tile of BM query rows); each warp owns 16*MT
//                 rows with Q in registers; loops over 64-key tiles from the causal
//                 diagonal down to key 0 with an online softmax (base-2 exponent,
//                 fp32 max/sum), P goes from the S accumulators straight into the A
//                 operand of P.V. Saves out and lse.
//   simple        one block per 16 query rows, 4 per warp, keys streamed 32 at a
//                 time, one per lane; the same online softmax with expf/logf.
#pragma once

#include <cmath>

#include "kernels/attention_common.cuh"

namespace attn {

// ----------------------------------------------------------------------------
// Tensor-core forward.

template <int HS, int MT, int NW>
struct FwdTile {
    static constexpr int kThreads = 32 * NW;
    static constexpr int kBM = 16 * MT * NW;  // query rows per block (16*MT per warp)
    static constexpr int kBN = 64;            // keys per tile
    static constexpr int kLD = HS + 8;        // shared row stride: +16 bytes keeps ldmatrix conflict-free
    // Q [BM][LD], K [2][BN][LD], V [2][BN][LD]
    static constexpr size_t kSmemBytes = (size_t)(kBM + 4 * kBN) * kLD * 2;
};

template <typename T16, int HS, int MT, int NW>
__global__ void __launch_bounds__(32 * NW)
    fwd_tc_kernel(T16* __restrict__ out, float* __restrict__ lse, const T16* __restrict__ qkv, int T, int NH,
                  float scale_log2) {
    using Tile = FwdTile<HS, MT, NW>;
    constexpr int BM = Tile::kBM, BN = Tile::kBN, LD = Tile::kLD, NT = Tile::kThreads;
    constexpr int KS = HS / 16;   // k-steps over the head dimension
    constexpr int NKT = BN / 8;   // n8 tiles of keys
    constexpr int NDT = HS / 8;   // n8 tiles of the head dimension
    static_assert(HS % 16 == 0 && NKT % 2 == 0 && NDT % 2 == 0, "tile shape");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T16* sQ = reinterpret_cast<T16*>(smem_raw);
    T16* sK = sQ + BM * LD;  // two stages
    T16* sV = sK + 2 * BN * LD;

    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;  // the longest (latest) query tiles start first
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const T16* gQ = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const T16* gK = gQ + C;
    const T16* gV = gQ + 2 * C;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int wq0 = q0 + warp * 16 * MT;  // this warp's first and last query row
    const int wq1 = wq0 + 16 * MT - 1;
    const int n_kt = (min(q0 + BM, T) - 1) / BN + 1;  // key tiles 0 .. n_kt-1, visited from the last down
    const int k_last = (n_kt - 1) * BN;

    // cp.async groups, in order: Q | K0 | V0 | K1 | V1 | ...
    load_rows_async<BM, HS, LD, NT>(sQ, gQ, C3, q0, T);
    cp_async_commit();
    load_rows_async<BN, HS, LD, NT>(sK, gK, C3, k_last, T);
    cp_async_commit();
    load_rows_async<BN, HS, LD, NT>(sV, gV, C3, k_last, T);
    cp_async_commit();

    cp_async_wait<2>();
    __syncthreads();
    uint32_t qa[MT][KS][4];  // Q stays in registers
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int ks = 0; ks < KS; ks++) load_a<LD>(qa[mt][ks], sQ, warp * 16 * MT + mt * 16, ks * 16, lane);

    float o[MT][NDT][4];
    float row_max[MT][2], row_sum[MT][2];  // running max (in units of log2, scale applied) and partial sum
#pragma unroll
    for (int mt = 0; mt < MT; mt++) {
#pragma unroll
        for (int dt = 0; dt < NDT; dt++) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.f;
        row_max[mt][0] = row_max[mt][1] = -INFINITY;
        row_sum[mt][0] = row_sum[mt][1] = 0.f;
    }

    for (int i = 0; i < n_kt; i++) {
        const int k0 = k_last - i * BN;
        const T16* cK = sK + (i & 1) * BN * LD;
        const T16* cV = sV + (i & 1) * BN * LD;

        cp_async_wait<1>();  // this tile's K has landed (its V may still be in flight)
        __syncthreads();     // for all threads; and every warp is done with tile i-1's K
        if (i + 1 < n_kt) load_rows_async<BN, HS, LD, NT>(sK + ((i + 1) & 1) * BN * LD, gK, C3, k0 - BN, T);
        cp_async_commit();

        // warp-uniform: does this tile reach the warp's rows, and does it need the mask
        const bool active = k0 <= wq1 && wq0 < T;
        const bool masked = k0 + BN - 1 > wq0 || k0 + BN > T;
        float s[MT][NKT][4];
        if (active) {
            // S = Q K^T
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int nt = 0; nt < NKT; nt++) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++)
#pragma unroll
                for (int np = 0; np < NKT / 2; np++) {
                    uint32_t bk[4];
                    load_b<LD>(bk, cK, np * 16, ks * 16, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        Tc<T16>::mma(s[mt][2 * np], qa[mt][ks], bk[0], bk[1]);
                        Tc<T16>::mma(s[mt][2 * np + 1], qa[mt][ks], bk[2], bk[3]);
                    }
                }
            // online softmax: P = 2^(S*scale*log2e - m), O and the sum rescaled by 2^(m_old - m)
#pragma unroll
            for (int mt = 0; mt < MT; mt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++) {
                    const int row = wq0 + mt * 16 + hr * 8 + gq;
                    float mx = -INFINITY;
#pragma unroll
                    for (int nt = 0; nt < NKT; nt++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float& x = s[mt][nt][2 * hr + e];
                            if (masked) {
                                const int key = k0 + nt * 8 + 2 * tq + e;
                                if (key > row || key >= T) x = -INFINITY;
                            }
                            mx = fmaxf(mx, x);
                        }
                    mx = quad_max(mx) * scale_log2;
                    const float m_new = fmaxf(row_max[mt][hr], mx);
                    const float m_use = m_new == -INFINITY ? 0.f : m_new;  // a row with nothing unmasked yet
                    const float alpha = ex2(row_max[mt][hr] - m_use);
                    row_max[mt][hr] = m_new;
                    float sum = 0.f;
#pragma unroll
                    for (int nt = 0; nt < NKT; nt++)
#pragma unroll
                        for (int e = 0; e < 2; e++) {
                            float& x = s[mt][nt][2 * hr + e];
                            x = ex2(fmaf(x, scale_log2, -m_use));
                            sum += x;
                        }
                    row_sum[mt][hr] = row_sum[mt][hr] * alpha + sum;
#pragma unroll
                    for (int dt = 0; dt < NDT; dt++) {
                        o[mt][dt][2 * hr] *= alpha;
                        o[mt][dt][2 * hr + 1] *= alpha;
                    }
                }
        }

        cp_async_wait<1>();  // this tile's V has landed
        __syncthreads();     // every warp is done with tile i-1's V
        if (i + 1 < n_kt) load_rows_async<BN, HS, LD, NT>(sV + ((i + 1) & 1) * BN * LD, gV, C3, k0 - BN, T);
        cp_async_commit();

        if (active) {
            // O += P V
#pragma unroll
            for (int j = 0; j < NKT / 2; j++) {
                uint32_t pa[MT][4];
#pragma unroll
                for (int mt = 0; mt < MT; mt++) c_to_a<T16>(pa[mt], s[mt][2 * j], s[mt][2 * j + 1]);
#pragma unroll
                for (int dp = 0; dp < NDT / 2; dp++) {
                    uint32_t bv[4];
                    load_b_trans<LD>(bv, cV, j * 16, dp * 16, lane);
#pragma unroll
                    for (int mt = 0; mt < MT; mt++) {
                        Tc<T16>::mma(o[mt][2 * dp], pa[mt], bv[0], bv[1]);
                        Tc<T16>::mma(o[mt][2 * dp + 1], pa[mt], bv[2], bv[3]);
                    }
                }
            }
        }
    }
    cp_async_wait<0>();  // only empty groups can be left; leave nothing in flight

    // out = O / l, lse = m ln2 + ln l
    float inv[MT][2];
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const float l = quad_sum(row_sum[mt][hr]);
            inv[mt][hr] = l > 0.f ? 1.f / l : 0.f;
            const int row = wq0 + mt * 16 + hr * 8 + gq;
            if (tq == 0 && row < T) lse[(size_t)bh * T + row] = row_max[mt][hr] * kLn2 + logf(l);
        }
    // Q's rows of this warp were read only by this warp: they stage its output
    store_warp_rows<T16, MT, HS, LD>(sQ + warp * 16 * MT * LD, o, inv, out + (size_t)b * T * C + (size_t)h * HS,
                                     (size_t)C, wq0, T, lane);
}

// ----------------------------------------------------------------------------
// Simple kernel, forward (the simple kernels' shape: kernels/attention_common.cuh).

template <typename T, int DPL>
__global__ void __launch_bounds__(kSimpleThreads, kSimpleMinBlocks)
    fwd_simple_kernel(T* __restrict__ out, float* __restrict__ lse, const T* __restrict__ qkv, int T_, int NH, int hs,
                      float scale) {
    extern __shared__ float smem_f[];
    const int ldt = hs + 1;
    float* sQ = smem_f;                   // [16][hs]
    float* sK = sQ + kSimpleOwn * hs;     // [32][hs+1]
    float* sV = sK + kSimpleTile * ldt;   // [32][hs+1]

    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * kSimpleOwn;
    const int C = NH * hs;
    const size_t C3 = 3 * (size_t)C;
    const T* gQ = qkv + (size_t)b * T_ * C3 + (size_t)h * hs;
    const T* gK = gQ + C;
    const T* gV = gQ + 2 * C;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    load_rows_f32<kSimpleOwn>(sQ, hs, gQ, C3, q0, T_, hs);
    float acc[kSimpleRowsPerWarp][DPL], m[kSimpleRowsPerWarp], l[kSimpleRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kSimpleRowsPerWarp; r++) {
        m[r] = -INFINITY;
        l[r] = 0.f;
#pragma unroll
        for (int i = 0; i < DPL; i++) acc[r][i] = 0.f;
    }
    const int last = min(q0 + kSimpleOwn, T_) - 1;
    for (int k0 = 0; k0 <= last; k0 += kSimpleTile) {
        __syncthreads();  // the previous tile is consumed (and the owned rows are in)
        load_rows_f32<kSimpleTile>(sK, ldt, gK, C3, k0, T_, hs);
        load_rows_f32<kSimpleTile>(sV, ldt, gV, C3, k0, T_, hs);
        __syncthreads();
        const int key = k0 + lane;
        float s[kSimpleRowsPerWarp] = {};
        for (int d = 0; d < hs; d++) {
            const float kd = sK[lane * ldt + d];
#pragma unroll
            for (int r = 0; r < kSimpleRowsPerWarp; r++)
                s[r] = fmaf(sQ[(warp * kSimpleRowsPerWarp + r) * hs + d], kd, s[r]);
        }
#pragma unroll
        for (int r = 0; r < kSimpleRowsPerWarp; r++) {
            const int row = q0 + warp * kSimpleRowsPerWarp + r;
            if (row >= T_ || k0 > row) continue;  // warp-uniform
            const bool valid = key <= row && key < T_;
            const float x = valid ? s[r] * scale : -INFINITY;
            const float m_new = fmaxf(m[r], warp_max(x));  // finite: key k0 <= row is valid
            const float alpha = expf(m[r] - m_new);
            const float p = valid ? expf(x - m_new) : 0.f;
            l[r] = l[r] * alpha + warp_sum(p);
            m[r] = m_new;
            const int n_keys = min(min(kSimpleTile, row - k0 + 1), T_ - k0);
#pragma unroll
            for (int i = 0; i < DPL; i++) acc[r][i] *= alpha;
            for (int j = 0; j < n_keys; j++) {
                const float pj = __shfl_sync(kFullMask, p, j);
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    const int d = lane + 32 * i;
                    if (d < hs) acc[r][i] = fmaf(pj, sV[j * ldt + d], acc[r][i]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kSimpleRowsPerWarp; r++) {
        const int row = q0 + warp * kSimpleRowsPerWarp + r;
        if (row >= T_) continue;
        T* o = out + ((size_t)b * T_ + row) * C + (size_t)h * hs;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < hs) o[d] = from_float<T>(acc[r][i] / l[r]);
        }
        if (lane == 0) lse[(size_t)bh * T_ + row] = m[r] + logf(l[r]);
    }
}

// ----------------------------------------------------------------------------
// Launchers. The tile shapes are template parameters so that dev/cuda/attention.cu
// can time the alternatives; attention_forward_cuda below picks the defaults.

template <typename T16, int HS, int MT, int NW>
void launch_fwd_tc(cudaStream_t stream, T16* out, float* lse, const T16* qkv, int B, int T_, int NH) {
    using Tile = FwdTile<HS, MT, NW>;
    auto kernel = fwd_tc_kernel<T16, HS, MT, NW>;
    set_smem(kernel, Tile::kSmemBytes);
    const dim3 grid((unsigned)(B * NH), grid_y(T_, Tile::kBM));
    const float scale_log2 = kLog2e / sqrtf((float)HS);
    kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(out, lse, qkv, T_, NH, scale_log2);
    cudaCheck(cudaGetLastError());
}

template <typename T, int DPL>
void launch_fwd_simple_dpl(cudaStream_t stream, T* out, float* lse, const T* qkv, int B, int T_, int NH, int hs) {
    auto kernel = fwd_simple_kernel<T, DPL>;
    const size_t smem = simple_smem_bytes(hs, false);
    set_smem(kernel, smem);
    const dim3 grid((unsigned)(B * NH), grid_y(T_, kSimpleOwn));
    kernel<<<grid, kSimpleThreads, smem, stream>>>(out, lse, qkv, T_, NH, hs, 1.0f / sqrtf((float)hs));
    cudaCheck(cudaGetLastError());
}

template <typename T>
void launch_fwd_simple(cudaStream_t stream, T* out, float* lse, const T* qkv, int B, int T_, int NH, int hs) {
    if (hs <= 32) launch_fwd_simple_dpl<T, 1>(stream, out, lse, qkv, B, T_, NH, hs);
    else if (hs <= 64) launch_fwd_simple_dpl<T, 2>(stream, out, lse, qkv, B, T_, NH, hs);
    else if (hs <= 128) launch_fwd_simple_dpl<T, 4>(stream, out, lse, qkv, B, T_, NH, hs);
    else launch_fwd_simple_dpl<T, 8>(stream, out, lse, qkv, B, T_, NH, hs);
}

}  // namespace attn

// out (B,T,C) and lse (B,NH,T) from qkv (B,T,3C); see kernels/cpu/attention.h
template <typename T>
void attention_forward_cuda(const KernelCtx& ctx, T* out, float* lse, const T* qkv, int B, int T_, int C, int NH) {
    attn::check_shape(B, T_, C, NH);
    if (B == 0 || T_ == 0) return;
    const int hs = C / NH;
    if constexpr (attn::kIs16Bit<T>) {
        if (attn::use_tensor_cores<T>(hs, {out, qkv})) {
            switch (hs) {
                case 32: attn::launch_fwd_tc<T, 32, 2, 4>(ctx.stream, out, lse, qkv, B, T_, NH); return;
                case 64: attn::launch_fwd_tc<T, 64, 2, 4>(ctx.stream, out, lse, qkv, B, T_, NH); return;
                case 128: attn::launch_fwd_tc<T, 128, 1, 8>(ctx.stream, out, lse, qkv, B, T_, NH); return;
            }
        }
    }
    attn::launch_fwd_simple<T>(ctx.stream, out, lse, qkv, B, T_, NH, hs);
}
