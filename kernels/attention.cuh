// Causal self-attention on the GPU: fused, flash-style forward and backward.
//
// Semantics are those of the CPU twin in kernels/cpu/attention.h: qkv is
// (B, T, 3C) with q | k | v blocks of C channels, head h owns channels
// [h*hs, (h+1)*hs); out is (B, T, C); lse is (B, NH, T), the natural
// log-sum-exp of each row's scaled causal scores (scale 1/sqrt(hs)); the
// backward pass overwrites dqkv. The T x T score matrix is never stored.
//
// Two implementations:
//
//  * Tensor cores (bf16 / fp16, hs in {32, 64, 128}, 16-byte aligned tensors):
//    mma.sync.m16n8k16 with fp32 accumulation, ldmatrix fragment loads from
//    shared memory padded by 16 bytes per row (conflict-free ldmatrix and
//    cp.async), K/V (or Q/dO) tiles double-buffered with cp.async so that the
//    next tile streams in while the current one is multiplied.
//      forward   one block per (b, h, tile of BM query rows); each warp owns 16*MT
//                rows with Q in registers; loops over 64-key tiles from the causal
//                diagonal down to key 0 with an online softmax (base-2 exponent,
//                fp32 max/sum), P goes from the S accumulators straight into the A
//                operand of P.V. Saves out and lse.
//      backward  deterministic, no atomics, in two kernels:
//                (1) dQ: one block per query tile (like the forward); it first computes
//                    D = rowsum(dout * out) for its rows (saved to the workspace), then
//                    recomputes P = exp(S - lse), dP = dO.V^T, dS = P (dP - D) and
//                    accumulates dQ = scale * dS.K in registers.
//                (2) dK/dV: one block per key tile; each warp owns 16 keys and loops
//                    over query tiles from the diagonal to T, recomputing P^T and
//                    dP^T with keys as the M dimension, so that P^T and dS^T feed
//                    dV += P^T.dO and dK += dS^T.Q directly from registers.
//                dQ is recomputed rather than atomically accumulated: 7 instead of 5
//                matrix products, in exchange for bit-identical results run to run.
//  * Simple fp32-accumulating kernels (any dtype, any hs <= 256, any alignment):
//    the fp32 path, used for exact checking against the CPU twin. A warp owns 4
//    rows, a lane one key (or query) of a 32-row tile in shared memory. Same
//    algorithm (online softmax forward; dQ and dK/dV backward kernels), with
//    expf/logf, and equally deterministic.
//
// Every reduction happens in a fixed order, so all paths are bit-reproducible.
// The backward needs attention_workspace_bytes(B*T, NH) bytes of ctx.workspace
// (the fp32 D vector, B*NH*T floats).
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "zero/base/backend.h"
#include "zero/base/dtype.h"

// Bytes of ctx.workspace attention_backward_cuda needs for micro-batches of BT
// tokens: the fp32 D = rowsum(dout * out) vector, one float per (b, h, t).
inline size_t attention_workspace_bytes(size_t BT, int NH) { return round_up(BT * (size_t)NH * sizeof(float), 256); }

namespace attn {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.69314718055994531f;
constexpr unsigned kFullMask = 0xffffffffu;

template <typename T>
constexpr bool kIs16Bit = std::is_same<T, bf16>::value || std::is_same<T, f16>::value;

// ----------------------------------------------------------------------------
// PTX wrappers

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16-byte global -> shared copy, asynchronous; when !valid nothing is read and the 16 bytes become zero
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(valid ? 4 : 0)
                 : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
// wait until at most N of this thread's most recently committed groups are still in flight
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// four 8x8 16-bit matrices; lanes 8i..8i+7 give the row addresses of matrix i, register i receives it
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

// 2^x, the SFU instruction (about 2 ulp; 2^-inf = +0)
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// The 16-bit operand type of the tensor-core instructions.
template <typename T16>
struct Tc;
template <>
struct Tc<bf16> {
    // d += a (16x16, row) * b (16x8, col), fp32 accumulators
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    // two floats rounded to nearest even; lo lands in the low half (the lower column)
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        uint32_t r;
        asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
};
template <>
struct Tc<f16> {
    static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
        asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
            "{%0, %1, %2, %3};\n"
            : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
            : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    }
    static __device__ __forceinline__ uint32_t pack(float lo, float hi) {
        uint32_t r;
        asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
        return r;
    }
};

// ----------------------------------------------------------------------------
// Fragments of mma.m16n8k16. With g = lane / 4 and t = lane % 4:
//   A (16x16): a0 = (g, 2t..2t+1), a1 = (g+8, 2t..), a2 = (g, 2t+8..), a3 = (g+8, 2t+8..)
//   B (16x8):  b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g)
//   C (16x8):  c0, c1 = (g, 2t..2t+1), c2, c3 = (g+8, 2t..2t+1)
// Shared-memory tiles are row-major with LD elements per row.

// A operand at (m0, k0) of a tile whose rows are M and whose contiguous dimension is K.
template <int LD, typename T16>
__device__ __forceinline__ void load_a(uint32_t (&a)[4], const T16* s, int m0, int k0, int lane) {
    ldsm_x4(a, smem_addr(s + (m0 + (lane & 15)) * LD + k0 + (lane >> 4) * 8));
}
// B operands of the two n8 tiles n0..n0+15 over k0..k0+15, from a tile whose rows are N
// and whose contiguous dimension is K (i.e. B^T row-major, like K in Q.K^T):
// b[0], b[1] belong to n-tile n0, b[2], b[3] to n-tile n0+8.
template <int LD, typename T16>
__device__ __forceinline__ void load_b(uint32_t (&b)[4], const T16* s, int n0, int k0, int lane) {
    ldsm_x4(b, smem_addr(s + (n0 + (lane & 7) + ((lane >> 4) << 3)) * LD + k0 + ((lane >> 3) & 1) * 8));
}
// The same operands from a tile whose rows are K and whose contiguous dimension is N
// (B row-major, like V in P.V): ldmatrix transposes on the way.
template <int LD, typename T16>
__device__ __forceinline__ void load_b_trans(uint32_t (&b)[4], const T16* s, int k0, int n0, int lane) {
    ldsm_x4_trans(b, smem_addr(s + (k0 + (lane & 7) + (((lane >> 3) & 1) << 3)) * LD + n0 + (lane >> 4) * 8));
}
// The C fragments of two adjacent n8 tiles, rounded to 16 bits, are the A fragment
// of the 16x16 block they cover (the register-level P -> A reuse).
template <typename T16>
__device__ __forceinline__ void c_to_a(uint32_t (&a)[4], const float (&c0)[4], const float (&c1)[4]) {
    a[0] = Tc<T16>::pack(c0[0], c0[1]);
    a[1] = Tc<T16>::pack(c0[2], c0[3]);
    a[2] = Tc<T16>::pack(c1[0], c1[1]);
    a[3] = Tc<T16>::pack(c1[2], c1[3]);
}

__device__ __forceinline__ float quad_max(float x) {
    x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
    return fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
    x += __shfl_xor_sync(kFullMask, x, 1);
    return x + __shfl_xor_sync(kFullMask, x, 2);
}
// butterfly reductions: every lane ends with the same, order-fixed result
__device__ __forceinline__ float warp_max(float x) {
    for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, o));
    return x;
}
__device__ __forceinline__ float warp_sum(float x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullMask, x, o);
    return x;
}

// Rows [row0, row0 + ROWS) of one head (HS values each, global row stride `stride`
// elements, `g` = row 0) into shared memory, asynchronously; rows >= T become zeros.
template <int ROWS, int HS, int LD, int NTHREADS, typename T16>
__device__ __forceinline__ void load_rows_async(T16* s, const T16* g, size_t stride, int row0, int T) {
    constexpr int kChunksPerRow = HS / 8;  // 16-byte chunks
    constexpr int kChunks = ROWS * kChunksPerRow;
#pragma unroll
    for (int it = 0; it < (kChunks + NTHREADS - 1) / NTHREADS; it++) {
        const int c = it * NTHREADS + (int)threadIdx.x;
        if (kChunks % NTHREADS == 0 || c < kChunks) {
            const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
            const int t = row0 + r;
            const bool ok = t < T;
            cp_async_16(smem_addr(s + r * LD + ch * 8), g + (size_t)(ok ? t : 0) * stride + ch * 8, ok);
        }
    }
}
// v[row0 .. row0 + ROWS) into shared memory, asynchronously; entries >= T become 0
template <int ROWS, int NTHREADS>
__device__ __forceinline__ void load_vec_async(float* s, const float* v, int row0, int T) {
    for (int r = threadIdx.x; r < ROWS; r += NTHREADS) {
        const int t = row0 + r;
        const bool ok = t < T;
        cp_async_4(smem_addr(s + r), v + (ok ? t : 0), ok);
    }
}

// A warp's accumulator rows (MT m16 tiles x HS columns, row (mt, half) scaled by
// mul[mt][half]) rounded to 16 bits, staged through the warp's own shared-memory rows
// `s` and written to global rows row0.. (< T) with 16-byte stores.
template <typename T16, int MT, int HS, int LD>
__device__ __forceinline__ void store_warp_rows(T16* s, const float (&acc)[MT][HS / 8][4], const float (&mul)[MT][2],
                                                T16* g, size_t stride, int row0, int T, int lane) {
    const int gq = lane >> 2, tq = lane & 3;
#pragma unroll
    for (int mt = 0; mt < MT; mt++)
#pragma unroll
        for (int nt = 0; nt < HS / 8; nt++) {
            const int r = mt * 16 + gq, c = nt * 8 + 2 * tq;
            *reinterpret_cast<uint32_t*>(s + r * LD + c) =
                Tc<T16>::pack(acc[mt][nt][0] * mul[mt][0], acc[mt][nt][1] * mul[mt][0]);
            *reinterpret_cast<uint32_t*>(s + (r + 8) * LD + c) =
                Tc<T16>::pack(acc[mt][nt][2] * mul[mt][1], acc[mt][nt][3] * mul[mt][1]);
        }
    __syncwarp();
    constexpr int kChunksPerRow = HS / 8;
#pragma unroll
    for (int c = lane; c < 16 * MT * kChunksPerRow; c += 32) {
        const int r = c / kChunksPerRow, ch = c % kChunksPerRow;
        if (row0 + r < T)
            *reinterpret_cast<uint4*>(g + (size_t)(row0 + r) * stride + ch * 8) =
                *reinterpret_cast<const uint4*>(s + r * LD + ch * 8);
    }
}

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
// Simple kernels: fp32 math on any dtype and any head size up to 32*DPL (DPL =
// head dims per lane). A block of 4 warps owns 16 rows (4 per warp); the other
// side streams through shared memory in tiles of 32 rows, one per lane, with a
// padded row stride (hs + 1 floats) so that lanes reading different rows at the
// same column hit different banks.

constexpr int kSimpleThreads = 128;
constexpr int kSimpleMinBlocks = 3;  // lets ptxas use up to 170 registers: no spills at any DPL
constexpr int kSimpleOwn = 16;        // rows owned per block
constexpr int kSimpleRowsPerWarp = 4;
constexpr int kSimpleTile = 32;       // rows per streamed tile

// rows [row0, row0 + ROWS) x hs of one head into float shared memory (stride ld); rows >= T are zeros
template <int ROWS, typename T>
__device__ __forceinline__ void load_rows_f32(float* s, int ld, const T* g, size_t stride, int row0, int T_, int hs) {
    for (int idx = threadIdx.x; idx < ROWS * hs; idx += kSimpleThreads) {
        const int r = idx / hs, d = idx % hs, t = row0 + r;
        s[r * ld + d] = t < T_ ? to_float(g[(size_t)t * stride + d]) : 0.f;
    }
}

inline size_t simple_smem_bytes(int hs, bool two_own) {
    // owned rows (one or two tensors) + two streamed tiles + two per-row vectors
    return ((size_t)(two_own ? 2 : 1) * kSimpleOwn * hs + 2 * kSimpleTile * (hs + 1) + 2 * kSimpleTile) * sizeof(float);
}

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
// can time the alternatives; attention_*_cuda below pick the defaults.

inline unsigned grid_y(int T_, int rows_per_block) {
    const size_t n = ceil_div((size_t)T_, (size_t)rows_per_block);
    CHECK(n <= 65535, "attention: sequence length %d is too long for the launch grid", T_);
    return (unsigned)n;
}

template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
    // per launch, not once: the attribute belongs to the current device
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

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
void launch_fwd_simple_dpl(cudaStream_t stream, T* out, float* lse, const T* qkv, int B, int T_, int NH, int hs) {
    auto kernel = fwd_simple_kernel<T, DPL>;
    const size_t smem = simple_smem_bytes(hs, false);
    set_smem(kernel, smem);
    const dim3 grid((unsigned)(B * NH), grid_y(T_, kSimpleOwn));
    kernel<<<grid, kSimpleThreads, smem, stream>>>(out, lse, qkv, T_, NH, hs, 1.0f / sqrtf((float)hs));
    cudaCheck(cudaGetLastError());
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

constexpr int kSimpleMaxHs = 256;

template <typename T>
void launch_fwd_simple(cudaStream_t stream, T* out, float* lse, const T* qkv, int B, int T_, int NH, int hs) {
    if (hs <= 32) launch_fwd_simple_dpl<T, 1>(stream, out, lse, qkv, B, T_, NH, hs);
    else if (hs <= 64) launch_fwd_simple_dpl<T, 2>(stream, out, lse, qkv, B, T_, NH, hs);
    else if (hs <= 128) launch_fwd_simple_dpl<T, 4>(stream, out, lse, qkv, B, T_, NH, hs);
    else launch_fwd_simple_dpl<T, 8>(stream, out, lse, qkv, B, T_, NH, hs);
}

template <typename T>
void launch_bwd_simple(cudaStream_t stream, T* dqkv, float* Dws, const T* dout, const T* qkv, const T* out,
                       const float* lse, int B, int T_, int NH, int hs) {
    if (hs <= 32) launch_bwd_simple_dpl<T, 1>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
    else if (hs <= 64) launch_bwd_simple_dpl<T, 2>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
    else if (hs <= 128) launch_bwd_simple_dpl<T, 4>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
    else launch_bwd_simple_dpl<T, 8>(stream, dqkv, Dws, dout, qkv, out, lse, B, T_, NH, hs);
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

// does the tensor-core path take this call (dtype, head size, 16-byte alignment)
template <typename T>
bool use_tensor_cores(int hs, std::initializer_list<const void*> ptrs) {
    if (!kIs16Bit<T> || (hs != 32 && hs != 64 && hs != 128)) return false;
    for (const void* p : ptrs)
        if (!aligned16(p)) return false;
    return true;
}

inline void check_shape(int B, int T_, int C, int NH) {
    CHECK(B >= 0 && T_ >= 0 && NH > 0 && C > 0 && C % NH == 0, "attention: bad shape B=%d T=%d C=%d NH=%d", B, T_, C,
          NH);
    CHECK(C / NH <= kSimpleMaxHs, "attention: head size %d is larger than the supported %d", C / NH, kSimpleMaxHs);
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
