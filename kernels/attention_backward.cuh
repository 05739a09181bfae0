// Causal self-attention on the GPU, backward (kernels/attention.cuh: the
// family, its semantics and its two implementations): dqkv (B, T, 3C)
// overwritten from dout, qkv and the forward's out and lse.
//
// Tensor cores: deterministic, no atomics, in two kernels:
//   (1) dQ: one block per query tile (like the forward); it first computes
//       D = rowsum(dout * out) for its rows (saved to the workspace), then
//       recomputes P = exp(S - lse), dP = dO.V^T, dS = P (dP - D) and
//       accumulates dQ = scale * dS.K in registers.
//   (2) dK/dV: one block per key tile; each warp owns 16 keys and loops
//       over query tiles from the diagonal to T, recomputing P^T and
//       dP^T with keys as the M dimension, so that P^T and dS^T feed
//       dV += P^T.dO and dK += dS^T.Q directly from registers.
//   dQ is recomputed rather than atomically accumulated: 7 instead of 5
//   matrix products, in exchange for bit-identical results run to run.
// The simple kernels: the same two kernels, 16 rows (or keys) per block.
//
// The backward needs attention_workspace_bytes(B*T, NH) bytes of ctx.workspace
// (the fp32 D vector, B*NH*T floats).
//
// Longer than 600 lines, and one unit: the dQ and dK/dV kernels are the two
// halves of one recomputation (the second reads the first's D and repeats its
// algebra transposed), and the simple kernels are the same algorithm, read
// against the tensor-core ones.
#pragma once

#include <cmath>

#include "kernels/attention_common.cuh"

// Bytes of ctx.workspace attention_backward_cuda needs for micro-batches of BT
// tokens: the fp32 D = rowsum(dout * out) vector, one float per (b, h, t).
inline size_t attention_workspace_bytes(size_t BT, int NH) { return round_up(BT * (size_t)NH * sizeof(float), 256); }

namespace attn {

// ----------------------------------------------------------------------------
// Tensor-core backward, kernel 1: D and dQ, one block per query tile.

template <int HS, int NW>
struct DqTile {
    static constexpr int kThreads = 32 * NW;
    static constexpr int kBM = 16 * NW;  // query rows per block, 16 per warp
    static constexpr int kBN = 64;       // keys per tile
    static constexpr int kLD = HS + 8;
    // Q [BM][LD], dO [BM][LD], K [2][BN][LD], V [2][BN][LD], then lse*log2e [BM] and D [BM] in fp32
    static constexpr size_t kSmemBytes = (size_t)(2 * kBM + 4 * kBN) * kLD * 2 + 2 * kBM * sizeof(float);
};

// dot product of 8 packed 16-bit values, in order
template <typename T16>
__device__ __forceinline__ float dot8(const uint4& a, const uint4& c, float acc) {
    const T16* pa = reinterpret_cast<const T16*>(&a);
    const T16* pc = reinterpret_cast<const T16*>(&c);
#pragma unroll
    for (int k = 0; k < 8; k++) acc = fmaf(to_float(pa[k]), to_float(pc[k]), acc);
    return acc;
}

template <typename T16, int HS, int NW>
__global__ void __launch_bounds__(32 * NW)
    bwd_dq_tc_kernel(T16* __restrict__ dqkv, float* __restrict__ Dws, const T16* __restrict__ dout,
                     const T16* __restrict__ qkv, const T16* __restrict__ out, const float* __restrict__ lse, int T,
                     int NH, float scale, float scale_log2) {
    using Tile = DqTile<HS, NW>;
    constexpr int BM = Tile::kBM, BN = Tile::kBN, LD = Tile::kLD, NT = Tile::kThreads;
    constexpr int KS = HS / 16, NKT = BN / 8, NDT = HS / 8;
    static_assert(NT == 2 * BM, "D is computed by two threads per row");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T16* sQ = reinterpret_cast<T16*>(smem_raw);
    T16* sdO = sQ + BM * LD;
    T16* sK = sdO + BM * LD;  // two stages
    T16* sV = sK + 2 * BN * LD;
    float* sL = reinterpret_cast<float*>(sV + 2 * BN * LD);
    float* sD = sL + BM;

    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * BM;
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const T16* gQ = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const T16* gK = gQ + C;
    const T16* gV = gQ + 2 * C;
    const T16* gdO = dout + (size_t)b * T * C + (size_t)h * HS;
    const T16* gO = out + (size_t)b * T * C + (size_t)h * HS;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int wq0 = q0 + warp * 16, wq1 = wq0 + 15;
    const int n_kt = (min(q0 + BM, T) - 1) / BN + 1;
    const int k_last = (n_kt - 1) * BN;

    // cp.async groups: Q+dO | K0 | V0 | K1 | V1 | ...
    load_rows_async<BM, HS, LD, NT>(sQ, gQ, C3, q0, T);
    load_rows_async<BM, HS, LD, NT>(sdO, gdO, (size_t)C, q0, T);
    cp_async_commit();
    load_rows_async<BN, HS, LD, NT>(sK, gK, C3, k_last, T);
    cp_async_commit();
    load_rows_async<BN, HS, LD, NT>(sV, gV, C3, k_last, T);
    cp_async_commit();

    // while those fly: D = rowsum(dout * out), two threads per row, straight from global
    {
        constexpr int kHalf = HS / 2;
        const int r = threadIdx.x >> 1, part = threadIdx.x & 1, row = q0 + r;
        float d = 0.f;
        if (row < T) {
            const T16* a = gdO + (size_t)row * C + part * kHalf;
            const T16* c = gO + (size_t)row * C + part * kHalf;
#pragma unroll
            for (int k = 0; k < kHalf; k += 8)
                d = dot8<T16>(*reinterpret_cast<const uint4*>(a + k), *reinterpret_cast<const uint4*>(c + k), d);
        }
        d += __shfl_xor_sync(kFullMask, d, 1);  // both halves get the same sum
        if (part == 0) {
            sD[r] = d;
            sL[r] = row < T ? lse[(size_t)bh * T + row] * kLog2e : 0.f;
            if (row < T) Dws[(size_t)bh * T + row] = d;
        }
    }

    cp_async_wait<2>();
    __syncthreads();
    // Q and dO stay in registers where registers allow (hs <= 64); otherwise their
    // fragments are re-read from shared memory at each use
    constexpr bool kAInRegs = HS <= 64;
    constexpr int KA = kAInRegs ? KS : 1;
    uint32_t qa[KA][4], da[KA][4];
    if (kAInRegs) {
#pragma unroll
        for (int ks = 0; ks < KA; ks++) {
            load_a<LD>(qa[ks], sQ, warp * 16, ks * 16, lane);
            load_a<LD>(da[ks], sdO, warp * 16, ks * 16, lane);
        }
    }
    float lse_r[2], D_r[2];
#pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        lse_r[hr] = sL[warp * 16 + hr * 8 + gq];
        D_r[hr] = sD[warp * 16 + hr * 8 + gq];
    }
    float dq[1][NDT][4];
#pragma unroll
    for (int dt = 0; dt < NDT; dt++) dq[0][dt][0] = dq[0][dt][1] = dq[0][dt][2] = dq[0][dt][3] = 0.f;

    for (int i = 0; i < n_kt; i++) {
        const int k0 = k_last - i * BN;
        const T16* cK = sK + (i & 1) * BN * LD;
        const T16* cV = sV + (i & 1) * BN * LD;

        cp_async_wait<1>();
        __syncthreads();
        if (i + 1 < n_kt) load_rows_async<BN, HS, LD, NT>(sK + ((i + 1) & 1) * BN * LD, gK, C3, k0 - BN, T);
        cp_async_commit();

        const bool active = k0 <= wq1 && wq0 < T;
        const bool masked = k0 + BN - 1 > wq0 || k0 + BN > T;
        float s[NKT][4], dp[NKT][4];
        if (active) {
            // S = Q K^T
#pragma unroll
            for (int nt = 0; nt < NKT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const int ka = kAInRegs ? ks : 0;
                if (!kAInRegs) load_a<LD>(qa[ka], sQ, warp * 16, ks * 16, lane);
#pragma unroll
                for (int np = 0; np < NKT / 2; np++) {
                    uint32_t bk[4];
                    load_b<LD>(bk, cK, np * 16, ks * 16, lane);
                    Tc<T16>::mma(s[2 * np], qa[ka], bk[0], bk[1]);
                    Tc<T16>::mma(s[2 * np + 1], qa[ka], bk[2], bk[3]);
                }
            }
        }

        cp_async_wait<1>();
        __syncthreads();
        if (i + 1 < n_kt) load_rows_async<BN, HS, LD, NT>(sV + ((i + 1) & 1) * BN * LD, gV, C3, k0 - BN, T);
        cp_async_commit();

        if (active) {
            // dP = dO V^T
#pragma unroll
            for (int nt = 0; nt < NKT; nt++) dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                const int ka = kAInRegs ? ks : 0;
                if (!kAInRegs) load_a<LD>(da[ka], sdO, warp * 16, ks * 16, lane);
#pragma unroll
                for (int np = 0; np < NKT / 2; np++) {
                    uint32_t bv[4];
                    load_b<LD>(bv, cV, np * 16, ks * 16, lane);
                    Tc<T16>::mma(dp[2 * np], da[ka], bv[0], bv[1]);
                    Tc<T16>::mma(dp[2 * np + 1], da[ka], bv[2], bv[3]);
                }
            }
            // dS = P (dP - D), P = 2^(S*scale*log2e - lse*log2e); masked entries exactly 0
#pragma unroll
            for (int nt = 0; nt < NKT; nt++)
#pragma unroll
                for (int hr = 0; hr < 2; hr++)
#pragma unroll
                    for (int e = 0; e < 2; e++) {
                        const int c = 2 * hr + e;
                        float p = ex2(fmaf(s[nt][c], scale_log2, -lse_r[hr]));
                        if (masked) {
                            const int key = k0 + nt * 8 + 2 * tq + e, row = wq0 + hr * 8 + gq;
                            if (key > row || key >= T) p = 0.f;
                        }
                        s[nt][c] = p * (dp[nt][c] - D_r[hr]);
                    }
            // dQ += dS K (scale applied at the end)
#pragma unroll
            for (int j = 0; j < NKT / 2; j++) {
                uint32_t a[4];
                c_to_a<T16>(a, s[2 * j], s[2 * j + 1]);
#pragma unroll
                for (int d2 = 0; d2 < NDT / 2; d2++) {
                    uint32_t bk[4];
                    load_b_trans<LD>(bk, cK, j * 16, d2 * 16, lane);
                    Tc<T16>::mma(dq[0][2 * d2], a, bk[0], bk[1]);
                    Tc<T16>::mma(dq[0][2 * d2 + 1], a, bk[2], bk[3]);
                }
            }
        }
    }
    cp_async_wait<0>();

    const float mul[1][2] = {{scale, scale}};
    store_warp_rows<T16, 1, HS, LD>(sQ + warp * 16 * LD, dq, mul, dqkv + (size_t)b * T * C3 + (size_t)h * HS, C3,
                                    wq0, T, lane);
}

// ----------------------------------------------------------------------------
// Tensor-core backward, kernel 2: dK and dV, one block per key tile.

template <int HS, int NW, int BM>
struct DkvTile {
    static constexpr int kThreads = 32 * NW;
    static constexpr int kBN = 16 * NW;  // keys per block, 16 per warp
    static constexpr int kBM = BM;       // query rows per step
    static constexpr int kLD = HS + 8;
    // K [BN][LD], V [BN][LD], Q [2][BM][LD], dO [2][BM][LD], lse [2][BM], D [2][BM]
    static constexpr size_t kSmemBytes = (size_t)(2 * kBN + 4 * kBM) * kLD * 2 + 4 * kBM * sizeof(float);
};

template <typename T16, int HS, int NW, int BM>
__global__ void __launch_bounds__(32 * NW)
    bwd_dkdv_tc_kernel(T16* __restrict__ dqkv, const T16* __restrict__ dout, const T16* __restrict__ qkv,
                       const float* __restrict__ lse, const float* __restrict__ Dws, int T, int NH, float scale,
                       float scale_log2) {
    using Tile = DkvTile<HS, NW, BM>;
    constexpr int BN = Tile::kBN, LD = Tile::kLD, NT = Tile::kThreads;
    constexpr int KS = HS / 16, NQT = BM / 8, NDT = HS / 8;
    static_assert(BM % 16 == 0, "tile shape");

    extern __shared__ __align__(16) unsigned char smem_raw[];
    T16* sK = reinterpret_cast<T16*>(smem_raw);
    T16* sV = sK + BN * LD;
    T16* sQ = sV + BN * LD;    // two stages
    T16* sdO = sQ + 2 * BM * LD;  // two stages
    float* sL = reinterpret_cast<float*>(sdO + 2 * BM * LD);  // two stages
    float* sD = sL + 2 * BM;                                   // two stages

    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.y * BN;  // the earliest keys (the most query tiles) start first
    const int C = NH * HS;
    const size_t C3 = 3 * (size_t)C;
    const T16* gQ = qkv + (size_t)b * T * C3 + (size_t)h * HS;
    const T16* gK = gQ + C;
    const T16* gV = gQ + 2 * C;
    const T16* gdO = dout + (size_t)b * T * C + (size_t)h * HS;
    const float* gL = lse + (size_t)bh * T;
    const float* gD = Dws + (size_t)bh * T;

    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gq = lane >> 2, tq = lane & 3;
    const int wk0 = k0 + warp * 16;  // this warp's first key
    const int q_first = (k0 / BM) * BM;
    const int n_qt = (T - q_first + BM - 1) / BM;

    // cp.async groups: K+V | Q0+lse0+D0 | dO0 | Q1+lse1+D1 | dO1 | ...
    load_rows_async<BN, HS, LD, NT>(sK, gK, C3, k0, T);
    load_rows_async<BN, HS, LD, NT>(sV, gV, C3, k0, T);
    cp_async_commit();
    load_rows_async<BM, HS, LD, NT>(sQ, gQ, C3, q_first, T);
    load_vec_async<BM, NT>(sL, gL, q_first, T);
    load_vec_async<BM, NT>(sD, gD, q_first, T);
    cp_async_commit();
    load_rows_async<BM, HS, LD, NT>(sdO, gdO, (size_t)C, q_first, T);
    cp_async_commit();

    float dk[1][NDT][4], dv[1][NDT][4];
#pragma unroll
    for (int dt = 0; dt < NDT; dt++)
#pragma unroll
        for (int c = 0; c < 4; c++) dk[0][dt][c] = dv[0][dt][c] = 0.f;

    for (int i = 0; i < n_qt; i++) {
        const int q0 = q_first + i * BM;
        const int st = i & 1;
        const T16* cQ = sQ + st * BM * LD;
        const T16* cdO = sdO + st * BM * LD;
        const float* cL = sL + st * BM;
        const float* cD = sD + st * BM;

        cp_async_wait<1>();  // K, V (first time) and this step's Q, lse, D have landed
        __syncthreads();
        if (i + 1 < n_qt) {
            load_rows_async<BM, HS, LD, NT>(sQ + (st ^ 1) * BM * LD, gQ, C3, q0 + BM, T);
            load_vec_async<BM, NT>(sL + (st ^ 1) * BM, gL, q0 + BM, T);
            load_vec_async<BM, NT>(sD + (st ^ 1) * BM, gD, q0 + BM, T);
        }
        cp_async_commit();

        const bool active = wk0 < T && q0 + BM - 1 >= wk0;
        const bool masked = q0 < wk0 + 15 || q0 + BM > T;
        float s[NQT][4], dp[NQT][4];  // S^T and dP^T: rows = the warp's keys, columns = queries
        if (active) {
            // S^T = K Q^T
#pragma unroll
            for (int nt = 0; nt < NQT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t ka[4];
                load_a<LD>(ka, sK, warp * 16, ks * 16, lane);
#pragma unroll
                for (int np = 0; np < NQT / 2; np++) {
                    uint32_t bq[4];
                    load_b<LD>(bq, cQ, np * 16, ks * 16, lane);
                    Tc<T16>::mma(s[2 * np], ka, bq[0], bq[1]);
                    Tc<T16>::mma(s[2 * np + 1], ka, bq[2], bq[3]);
                }
            }
            // P^T = 2^(S^T*scale*log2e - lse*log2e) per query column; masked entries exactly 0
#pragma unroll
            for (int nt = 0; nt < NQT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int col = nt * 8 + 2 * tq + e;
                    const float l2 = cL[col] * kLog2e;
#pragma unroll
                    for (int hr = 0; hr < 2; hr++) {
                        float p = ex2(fmaf(s[nt][2 * hr + e], scale_log2, -l2));
                        if (masked) {
                            const int q = q0 + col, key = wk0 + hr * 8 + gq;
                            if (q < key || q >= T) p = 0.f;
                        }
                        s[nt][2 * hr + e] = p;
                    }
                }
        }

        cp_async_wait<1>();  // this step's dO has landed
        __syncthreads();
        if (i + 1 < n_qt) load_rows_async<BM, HS, LD, NT>(sdO + (st ^ 1) * BM * LD, gdO, (size_t)C, q0 + BM, T);
        cp_async_commit();

        if (active) {
            // dP^T = V dO^T
#pragma unroll
            for (int nt = 0; nt < NQT; nt++) dp[nt][0] = dp[nt][1] = dp[nt][2] = dp[nt][3] = 0.f;
#pragma unroll
            for (int ks = 0; ks < KS; ks++) {
                uint32_t va[4];
                load_a<LD>(va, sV, warp * 16, ks * 16, lane);
#pragma unroll
                for (int np = 0; np < NQT / 2; np++) {
                    uint32_t bo[4];
                    load_b<LD>(bo, cdO, np * 16, ks * 16, lane);
                    Tc<T16>::mma(dp[2 * np], va, bo[0], bo[1]);
                    Tc<T16>::mma(dp[2 * np + 1], va, bo[2], bo[3]);
                }
            }
            // dV += P^T dO
#pragma unroll
            for (int j = 0; j < NQT / 2; j++) {
                uint32_t a[4];
                c_to_a<T16>(a, s[2 * j], s[2 * j + 1]);
#pragma unroll
                for (int d2 = 0; d2 < NDT / 2; d2++) {
                    uint32_t bo[4];
                    load_b_trans<LD>(bo, cdO, j * 16, d2 * 16, lane);
                    Tc<T16>::mma(dv[0][2 * d2], a, bo[0], bo[1]);
                    Tc<T16>::mma(dv[0][2 * d2 + 1], a, bo[2], bo[3]);
                }
            }
            // dS^T = P^T (dP^T - D)
#pragma unroll
            for (int nt = 0; nt < NQT; nt++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const float Dq = cD[nt * 8 + 2 * tq + e];
                    s[nt][e] *= dp[nt][e] - Dq;
                    s[nt][2 + e] *= dp[nt][2 + e] - Dq;
                }
            // dK += dS^T Q (scale applied at the end)
#pragma unroll
            for (int j = 0; j < NQT / 2; j++) {
                uint32_t a[4];
                c_to_a<T16>(a, s[2 * j], s[2 * j + 1]);
#pragma unroll
                for (int d2 = 0; d2 < NDT / 2; d2++) {
                    uint32_t bq[4];
                    load_b_trans<LD>(bq, cQ, j * 16, d2 * 16, lane);
                    Tc<T16>::mma(dk[0][2 * d2], a, bq[0], bq[1]);
                    Tc<T16>::mma(dk[0][2 * d2 + 1], a, bq[2], bq[3]);
                }
            }
        }
    }
    cp_async_wait<0>();

    // K's and V's rows of this warp were read only by this warp: they stage dK and dV
    T16* gdK = dqkv + (size_t)b * T * C3 + (size_t)C + (size_t)h * HS;
    const float mul_k[1][2] = {{scale, scale}}, mul_v[1][2] = {{1.f, 1.f}};
    store_warp_rows<T16, 1, HS, LD>(sK + warp * 16 * LD, dk, mul_k, gdK, C3, wk0, T, lane);
    store_warp_rows<T16, 1, HS, LD>(sV + warp * 16 * LD, dv, mul_v, gdK + C, C3, wk0, T, lane);
}

// ----------------------------------------------------------------------------
// Simple kernels, backward (the simple kernels' shape: kernels/attention_common.cuh).

// D = rowsum(dout * out) (saved to Dws) and dQ, one block per 16 query rows
template <typename T, int DPL>
__global__ void __launch_bounds__(kSimpleThreads, kSimpleMinBlocks)
    bwd_dq_simple_kernel(T* __restrict__ dqkv, float* __restrict__ Dws, const T* __restrict__ dout,
                         const T* __restrict__ qkv, const T* __restrict__ out, const float* __restrict__ lse, int T_,
                         int NH, int hs, float scale) {
    extern __shared__ float smem_f[];
    const int ldt = hs + 1;
    float* sQ = smem_f;                  // [16][hs]
    float* sdO = sQ + kSimpleOwn * hs;   // [16][hs]
    float* sK = sdO + kSimpleOwn * hs;   // [32][hs+1]
    float* sV = sK + kSimpleTile * ldt;  // [32][hs+1]

    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int q0 = (gridDim.y - 1 - blockIdx.y) * kSimpleOwn;
    const int C = NH * hs;
    const size_t C3 = 3 * (size_t)C;
    const T* gQ = qkv + (size_t)b * T_ * C3 + (size_t)h * hs;
    const T* gK = gQ + C;
    const T* gV = gQ + 2 * C;
    const T* gdO = dout + (size_t)b * T_ * C + (size_t)h * hs;
    const T* gO = out + (size_t)b * T_ * C + (size_t)h * hs;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    load_rows_f32<kSimpleOwn>(sQ, hs, gQ, C3, q0, T_, hs);
    load_rows_f32<kSimpleOwn>(sdO, hs, gdO, (size_t)C, q0, T_, hs);
    __syncthreads();
    float D[kSimpleRowsPerWarp], L[kSimpleRowsPerWarp], dq[kSimpleRowsPerWarp][DPL];
#pragma unroll
    for (int r = 0; r < kSimpleRowsPerWarp; r++) {
        const int rl = warp * kSimpleRowsPerWarp + r, row = q0 + rl;
        float d = 0.f;
        if (row < T_)
            for (int c = lane; c < hs; c += 32) d = fmaf(sdO[rl * hs + c], to_float(gO[(size_t)row * C + c]), d);
        D[r] = warp_sum(d);
        L[r] = row < T_ ? lse[(size_t)bh * T_ + row] : 0.f;
        if (lane == 0 && row < T_) Dws[(size_t)bh * T_ + row] = D[r];
#pragma unroll
        for (int i = 0; i < DPL; i++) dq[r][i] = 0.f;
    }
    const int last = min(q0 + kSimpleOwn, T_) - 1;
    for (int k0 = 0; k0 <= last; k0 += kSimpleTile) {
        __syncthreads();
        load_rows_f32<kSimpleTile>(sK, ldt, gK, C3, k0, T_, hs);
        load_rows_f32<kSimpleTile>(sV, ldt, gV, C3, k0, T_, hs);
        __syncthreads();
        const int key = k0 + lane;
        float s[kSimpleRowsPerWarp] = {}, dp[kSimpleRowsPerWarp] = {};
        for (int d = 0; d < hs; d++) {
            const float kd = sK[lane * ldt + d], vd = sV[lane * ldt + d];
#pragma unroll
            for (int r = 0; r < kSimpleRowsPerWarp; r++) {
                const int rl = warp * kSimpleRowsPerWarp + r;
                s[r] = fmaf(sQ[rl * hs + d], kd, s[r]);
                dp[r] = fmaf(sdO[rl * hs + d], vd, dp[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < kSimpleRowsPerWarp; r++) {
            const int row = q0 + warp * kSimpleRowsPerWarp + r;
            if (row >= T_ || k0 > row) continue;  // warp-uniform
            const bool valid = key <= row && key < T_;
            const float p = valid ? expf(s[r] * scale - L[r]) : 0.f;
            const float ds = p * (dp[r] - D[r]);
            const int n_keys = min(min(kSimpleTile, row - k0 + 1), T_ - k0);
            for (int j = 0; j < n_keys; j++) {
                const float dsj = __shfl_sync(kFullMask, ds, j);
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    const int d = lane + 32 * i;
                    if (d < hs) dq[r][i] = fmaf(dsj, sK[j * ldt + d], dq[r][i]);
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kSimpleRowsPerWarp; r++) {
        const int row = q0 + warp * kSimpleRowsPerWarp + r;
        if (row >= T_) continue;
        T* o = dqkv + ((size_t)b * T_ + row) * C3 + (size_t)h * hs;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < hs) o[d] = from_float<T>(dq[r][i] * scale);
        }
    }
}

// dK and dV, one block per 16 keys
template <typename T, int DPL>
__global__ void __launch_bounds__(kSimpleThreads, kSimpleMinBlocks)
    bwd_dkdv_simple_kernel(T* __restrict__ dqkv, const T* __restrict__ dout, const T* __restrict__ qkv,
                           const float* __restrict__ lse, const float* __restrict__ Dws, int T_, int NH, int hs,
                           float scale) {
    extern __shared__ float smem_f[];
    const int ldt = hs + 1;
    float* sK = smem_f;                    // [16][hs]
    float* sV = sK + kSimpleOwn * hs;      // [16][hs]
    float* sQ = sV + kSimpleOwn * hs;      // [32][hs+1]
    float* sdO = sQ + kSimpleTile * ldt;   // [32][hs+1]
    float* sL = sdO + kSimpleTile * ldt;   // [32]
    float* sD = sL + kSimpleTile;          // [32]

    const int bh = blockIdx.x, b = bh / NH, h = bh % NH;
    const int k0 = blockIdx.y * kSimpleOwn;
    const int C = NH * hs;
    const size_t C3 = 3 * (size_t)C;
    const T* gQ = qkv + (size_t)b * T_ * C3 + (size_t)h * hs;
    const T* gK = gQ + C;
    const T* gV = gQ + 2 * C;
    const T* gdO = dout + (size_t)b * T_ * C + (size_t)h * hs;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

    load_rows_f32<kSimpleOwn>(sK, hs, gK, C3, k0, T_, hs);
    load_rows_f32<kSimpleOwn>(sV, hs, gV, C3, k0, T_, hs);
    float dk[kSimpleRowsPerWarp][DPL], dv[kSimpleRowsPerWarp][DPL];
#pragma unroll
    for (int r = 0; r < kSimpleRowsPerWarp; r++)
#pragma unroll
        for (int i = 0; i < DPL; i++) dk[r][i] = dv[r][i] = 0.f;

    for (int q0 = (k0 / kSimpleTile) * kSimpleTile; q0 < T_; q0 += kSimpleTile) {
        __syncthreads();
        load_rows_f32<kSimpleTile>(sQ, ldt, gQ, C3, q0, T_, hs);
        load_rows_f32<kSimpleTile>(sdO, ldt, gdO, (size_t)C, q0, T_, hs);
        if (threadIdx.x < kSimpleTile) {
            const int t = q0 + threadIdx.x;
            sL[threadIdx.x] = t < T_ ? lse[(size_t)bh * T_ + t] : 0.f;
            sD[threadIdx.x] = t < T_ ? Dws[(size_t)bh * T_ + t] : 0.f;
        }
        __syncthreads();
        const int q = q0 + lane;
        float s[kSimpleRowsPerWarp] = {}, dp[kSimpleRowsPerWarp] = {};
        for (int d = 0; d < hs; d++) {
            const float qd = sQ[lane * ldt + d], od = sdO[lane * ldt + d];
#pragma unroll
            for (int r = 0; r < kSimpleRowsPerWarp; r++) {
                const int rl = warp * kSimpleRowsPerWarp + r;
                s[r] = fmaf(sK[rl * hs + d], qd, s[r]);
                dp[r] = fmaf(sV[rl * hs + d], od, dp[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < kSimpleRowsPerWarp; r++) {
            const int key = k0 + warp * kSimpleRowsPerWarp + r;
            if (key >= T_ || q0 + kSimpleTile - 1 < key) continue;  // warp-uniform
            const bool valid = q >= key && q < T_;
            const float p = valid ? expf(s[r] * scale - sL[lane]) : 0.f;
            const float ds = p * (dp[r] - sD[lane]);
            const int j0 = max(0, key - q0), j1 = min(kSimpleTile, T_ - q0);
            for (int j = j0; j < j1; j++) {
                const float pj = __shfl_sync(kFullMask, p, j), dsj = __shfl_sync(kFullMask, ds, j);
#pragma unroll
                for (int i = 0; i < DPL; i++) {
                    const int d = lane + 32 * i;
                    if (d < hs) {
                        dv[r][i] = fmaf(pj, sdO[j * ldt + d], dv[r][i]);
                        dk[r][i] = fmaf(dsj, sQ[j * ldt + d], dk[r][i]);
                    }
                }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < kSimpleRowsPerWarp; r++) {
        const int key = k0 + warp * kSimpleRowsPerWarp + r;
        if (key >= T_) continue;
        T* o = dqkv + ((size_t)b * T_ + key) * C3 + C + (size_t)h * hs;
#pragma unroll
        for (int i = 0; i < DPL; i++) {
            const int d = lane + 32 * i;
            if (d < hs) {
                o[d] = from_float<T>(dk[r][i] * scale);
                o[C + d] = from_float<T>(dv[r][i]);
            }
        }
    }
}

// ----------------------------------------------------------------------------
// Launchers. The tile shapes are template parameters so that dev/cuda/attention.cu
// can time the alternatives; attention_backward_cuda below picks the defaults.

// Dws: B*NH*T floats of scratch (D)
template <typename T16, int HS, int NW_Q, int NW_KV, int BM_KV>
void launch_bwd_tc(cudaStream_t stream, T16* dqkv, float* Dws, const T16* dout, const T16* qkv, const T16* out,
                   const float* lse, int B, int T_, int NH) {
    const float scale = 1.0f / sqrtf((float)HS), scale_log2 = scale * kLog2e;
    {  // dQ (and D) first: the dK/dV kernel reads D
        using Tile = DqTile<HS, NW_Q>;
        auto kernel = bwd_dq_tc_kernel<T16, HS, NW_Q>;
        set_smem(kernel, Tile::kSmemBytes);
        const dim3 grid((unsigned)(B * NH), grid_y(T_, Tile::kBM));
        kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(dqkv, Dws, dout, qkv, out, lse, T_, NH, scale,
                                                                   scale_log2);
        cudaCheck(cudaGetLastError());
    }
    {
        using Tile = DkvTile<HS, NW_KV, BM_KV>;
        auto kernel = bwd_dkdv_tc_kernel<T16, HS, NW_KV, BM_KV>;
        set_smem(kernel, Tile::kSmemBytes);
        const dim3 grid((unsigned)(B * NH), grid_y(T_, Tile::kBN));
        kernel<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(dqkv, dout, qkv, lse, Dws, T_, NH, scale,
                                                                   scale_log2);
        cudaCheck(cudaGetLastError());
    }
}

template <typename T, int DPL>
void launch_bwd_simple_dpl(cudaStream_t stream, T* dqkv, float* Dws, const T* dout, const T* qkv, const T* out,
                           const float* lse, int B, int T_, int NH, int hs) {
    const float scale = 1.0f / sqrtf((float)hs);
    const dim3 grid((unsigned)(B * NH), grid_y(T_, kSimpleOwn));
    const size_t smem = simple_smem_bytes(hs, true);
    auto k_dq = bwd_dq_simple_kernel<T, DPL>;
    set_smem(k_dq, smem);
    k_dq<<<grid, kSimpleThreads, smem, stream>>>(dqkv, Dws, dout, qkv, out, lse, T_, NH, hs, scale);
    cudaCheck(cudaGetLastError());
    auto k_dkdv = bwd_dkdv_simple_kernel<T, DPL>;
    set_smem(k_dkdv, smem);
    k_dkdv<<<grid, kSimpleThreads, smem, stream>>>(dqkv, dout, qkv, lse, Dws, T_, NH, hs, scale);
    cudaCheck(cudaGetLastError());
}

template <typename T>
void launch_bwd_simple(cudaStream_t stream, T* dqkv, float* Dws, const T* dout, const T* qkv, const T* out,
                       const float* lse, int B, int T_, int NH, int hs) {
    if (hs <= 32) launch_bwd_simple_dpl<T, 1>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
    else if (hs <= 64) launch_bwd_simple_dpl<T, 2>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
    else if (hs <= 128) launch_bwd_simple_dpl<T, 4>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
    else launch_bwd_simple_dpl<T, 8>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
}

}  // namespace attn

// dqkv (B,T,3C) overwritten; uses attention_workspace_bytes(B*T, NH) of ctx.workspace
template <typename T>
void attention_backward_cuda(const KernelCtx& ctx, T* dqkv, const T* dout, const T* qkv, const T* out,
                             const float* lse, int B, int T_, int C, int NH) {
    attn::check_shape(B, T_, C, NH);
    if (B == 0 || T_ == 0) return;
    const int hs = C / NH;
    const size_t need = attention_workspace_bytes((size_t)B * T_, NH);
    CHECK(ctx.workspace != nullptr && ctx.workspace_bytes >= need,
          "attention backward needs %zu bytes of kernel workspace, the context has %zu", need, ctx.workspace_bytes);
    float* Dws = static_cast<float*>(ctx.workspace);
    if constexpr (attn::kIs16Bit<T>) {
        if (attn::use_tensor_cores<T>(hs, {dqkv, dout, qkv, out})) {
            switch (hs) {
                case 32: attn::launch_bwd_tc<T, 32, 4, 4, 64>(ctx.stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH); return;
                case 64: attn::launch_bwd_tc<T, 64, 4, 4, 64>(ctx.stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH); return;
                case 128: attn::launch_bwd_tc<T, 128, 4, 4, 32>(ctx.stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH); return;
            }
        }
    }
    attn::launch_bwd_simple<T>(ctx.stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
}
