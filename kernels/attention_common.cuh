// Causal self-attention on the GPU, the parts both directions share
// (kernels/attention.cuh: the family, its semantics and its two
// implementations): the PTX wrappers (cp.async, ldmatrix, ex2), the 16-bit
// operand type of mma.m16n8k16 and its fragments, quad and warp reductions,
// the asynchronous tile loads into shared memory and the staged stores of a
// warp's rows; the simple kernels' block shape, tile loads and shared-memory
// size; and the launch helpers (the grid's y extent, the shared-memory
// attribute, which path takes a call, the shape check).
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

// ----------------------------------------------------------------------------
// Launch helpers, for the launchers of kernels/attention_forward.cuh and
// kernels/attention_backward.cuh.

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

constexpr int kSimpleMaxHs = 256;

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
