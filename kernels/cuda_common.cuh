// Device helpers shared by every CUDA kernel family in kernels/*.cuh:
// error checks, 128-bit packed loads/stores, warp and block reductions, the
// dtype -> CUDA type mappings, and the workspace sizes kernels.h asks for.
//
// Only included by nvcc (through kernels/kernels.h under ZERO_CUDA, or by the
// workbench in dev/cuda/).
#pragma once

#include <cstddef>
#include <cstdint>

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "zero/base/backend.h"
#include "zero/base/common.h"
#include "zero/base/dtype.h"

// ----------------------------------------------------------------------------
// error checks

#define cublasCheck(call)                                                                          \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                          \
            fail("cuBLAS error %d (%s) at %s:%d", (int)st_, cublasLtGetStatusString(st_), __FILE__, \
                 __LINE__);                                                                        \
    } while (0)

// after every launch: catches bad launch configurations without a device sync
#define cudaLaunchCheck() cudaCheck(cudaGetLastError())

// ----------------------------------------------------------------------------
// small integer helpers usable on both sides

template <typename I>
__host__ __device__ __forceinline__ constexpr I cdiv(I a, I b) {
    return (a + b - 1) / b;
}

// Number of SMs of the current device (cudaDeviceGetAttribute is a cheap
// driver-side lookup, so no cache is needed).
inline int device_sm_count() {
    int dev = 0, sms = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return sms;
}

// Grid size for a grid-stride elementwise kernel over `work` items handled
// `per_block` at a time: enough blocks to fill the machine several times over,
// never more than needed.
inline unsigned grid_for(size_t work, size_t per_block, int blocks_per_sm = 8) {
    size_t need = ceil_div(work, per_block);
    size_t cap = (size_t)device_sm_count() * (size_t)blocks_per_sm;
    size_t g = need < cap ? need : cap;
    return (unsigned)(g < 1 ? 1 : g);
}

// ----------------------------------------------------------------------------
// dtype mappings: our 2-byte structs <-> CUDA's hardware types and cuBLASLt ids

template <typename T> struct cuda_type;
template <> struct cuda_type<float> { using type = float; };
template <> struct cuda_type<bf16> { using type = __nv_bfloat16; };
template <> struct cuda_type<f16> { using type = __half; };

template <typename T> constexpr cudaDataType_t cuda_data_type();
template <> constexpr cudaDataType_t cuda_data_type<float>() { return CUDA_R_32F; }
template <> constexpr cudaDataType_t cuda_data_type<bf16>() { return CUDA_R_16BF; }
template <> constexpr cudaDataType_t cuda_data_type<f16>() { return CUDA_R_16F; }

// ----------------------------------------------------------------------------
// 128-bit packed vectors: 4 floats or 8 bf16/f16 moved with one load/store
// instruction. Element access converts through fp32 (to_float / from_float of
// zero/base/dtype.h, which use the hardware conversions on the device).

template <typename T>
struct alignas(16) Packed128 {
    static constexpr int size = (int)(16 / sizeof(T));
    T v[size];

    __device__ __forceinline__ float get(int i) const { return to_float(v[i]); }
    __device__ __forceinline__ void set(int i, float x) { v[i] = from_float<T>(x); }
    __device__ __forceinline__ static Packed128 zeros() {
        Packed128 p;
        int4 z = make_int4(0, 0, 0, 0);
        memcpy(&p, &z, 16);
        return p;
    }
    __device__ __forceinline__ int4 as_int4() const {
        int4 r;
        memcpy(&r, this, 16);
        return r;
    }
    __device__ __forceinline__ static Packed128 from_int4(int4 bits) {
        Packed128 p;
        memcpy(&p, &bits, 16);
        return p;
    }
};

// All pointers must be 16-byte aligned.
// plain load (cached in L1/L2)
template <typename T>
__device__ __forceinline__ Packed128<T> load128(const T* p) {
    return Packed128<T>::from_int4(*reinterpret_cast<const int4*>(p));
}
// read-only-path load (the data is not written by this kernel)
template <typename T>
__device__ __forceinline__ Packed128<T> load128ro(const T* p) {
    return Packed128<T>::from_int4(__ldg(reinterpret_cast<const int4*>(p)));
}
// streaming load: "cache streaming", read once, evict first
template <typename T>
__device__ __forceinline__ Packed128<T> load128cs(const T* p) {
    return Packed128<T>::from_int4(__ldcs(reinterpret_cast<const int4*>(p)));
}
template <typename T>
__device__ __forceinline__ void store128(T* p, const Packed128<T>& x) {
    *reinterpret_cast<int4*>(p) = x.as_int4();
}
// streaming store: written once, not re-read soon
template <typename T>
__device__ __forceinline__ void store128cs(T* p, const Packed128<T>& x) {
    __stcs(reinterpret_cast<int4*>(p), x.as_int4());
}

// 4-element vectors: one 16-byte access for fp32, one 8-byte access for
// bf16/f16. Used where arrays of different widths advance in lockstep (AdamW,
// casts, accumulation), so that every array moves 4 elements per access.
template <typename T>
struct alignas(4 * sizeof(T)) Packed4 {
    T v[4];
    __device__ __forceinline__ float get(int i) const { return to_float(v[i]); }
    __device__ __forceinline__ void set(int i, float x) { v[i] = from_float<T>(x); }
};
template <typename T> struct packed4_bits;
template <> struct packed4_bits<float> { using type = int4; };
template <> struct packed4_bits<bf16> { using type = int2; };
template <> struct packed4_bits<f16> { using type = int2; };

// streaming (read-once) load / store of 4 elements; p aligned to 4*sizeof(T)
template <typename T>
__device__ __forceinline__ Packed4<T> load4cs(const T* p) {
    using B = typename packed4_bits<T>::type;
    B bits = __ldcs(reinterpret_cast<const B*>(p));
    Packed4<T> r;
    memcpy(&r, &bits, sizeof(B));
    return r;
}
template <typename T>
__device__ __forceinline__ void store4cs(T* p, const Packed4<T>& x) {
    using B = typename packed4_bits<T>::type;
    B bits;
    memcpy(&bits, &x, sizeof(B));
    __stcs(reinterpret_cast<B*>(p), bits);
}

// true when p is 16-byte aligned (host side check before picking a vector path)
inline bool aligned16(const void* p) { return ((uintptr_t)p & 15u) == 0; }
inline bool aligned_to(const void* p, size_t bytes) { return ((uintptr_t)p % bytes) == 0; }

// ----------------------------------------------------------------------------
// reductions. The order of every reduction is fixed by the thread layout, so
// results are bitwise reproducible run to run for a fixed launch shape.

constexpr int WARP_SIZE = 32;

__device__ __forceinline__ float warp_reduce_sum(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
__device__ __forceinline__ float warp_reduce_max(float v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// Block-wide reductions for blockDim.x a multiple of 32 (<= 1024). Every
// thread gets the result. Safe to call several times in a row: the leading
// barrier protects the shared slots from the previous call's readers.
__device__ __forceinline__ float block_reduce_sum(float v) {
    __shared__ float slots[32];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int nwarps = blockDim.x / WARP_SIZE;
    v = warp_reduce_sum(v);
    __syncthreads();
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? slots[lane] : 0.0f;
    return warp_reduce_sum(r);
}
__device__ __forceinline__ float block_reduce_max(float v) {
    __shared__ float slots[32];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int nwarps = blockDim.x / WARP_SIZE;
    v = warp_reduce_max(v);
    __syncthreads();
    if (lane == 0) slots[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? slots[lane] : -INFINITY;
    return warp_reduce_max(r);
}

// The entry of a table of pieces, in order of their `first_block`, that block b
// of a launch over the table works on: the last one starting at or before b
// (an empty piece starts where the next one does, so it is never chosen).
template <typename Piece>
__device__ __forceinline__ int piece_of_block(const Piece* pieces, int npieces, unsigned b) {
    int lo = 0, hi = npieces - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (pieces[mid].first_block <= b) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// ----------------------------------------------------------------------------
// workspaces

// cuBLASLt's own workspace (Hopper kernels like 32 MiB).
#define CUBLASLT_WORKSPACE_BYTES ((size_t)32 << 20)

// Fixed partial-sum grid sizes of the deterministic two-pass reductions. They
// depend on nothing but these constants (not on the device), so results are
// the same on every GPU model.
constexpr int LN_BWD_BLOCKS = 256;      // layernorm backward: dweight/dbias partial rows
constexpr int LN_BWD_MAX_WARPS = 8;     // layernorm backward: warps per block, at most
constexpr int DBIAS_ROW_CHUNKS = 64;    // matmul backward: dbias partial rows
constexpr int SUMSQ_BLOCKS = 1024;      // sum of squares: partial sums

// The encoder backward's split runs (kernels/encoder.cuh): at most
// 2 BT / split + 1 pieces, since every long run has more than `split`
// positions; the ints (positions, work items, long runs), then the pieces'
// rows of C fp32 partial sums, 16-byte aligned.
inline size_t encoder_split_pieces_max(size_t BT, int split) { return 2 * BT / (size_t)split + 1; }
inline size_t encoder_split_ints(size_t BT, int split) {
    return BT + 3 * (BT + encoder_split_pieces_max(BT, split)) + 3 * (BT / (size_t)split + 1);
}
inline size_t encoder_split_workspace_bytes(size_t BT, int C, int split) {
    return round_up(encoder_split_ints(BT, split) * sizeof(int), 16) +
           encoder_split_pieces_max(BT, split) * (size_t)C * sizeof(float);
}
// The wide dbias grid (kernels/matmul.cuh, dbias_row_chunks): a bias of OC
// columns takes at most max(DBIAS_ROW_CHUNKS OC, DBIAS_TARGET_BLOCKS 256 + OC)
// partial sums (the widest biased matmul is fc, OC = 4C).
constexpr int DBIAS_TARGET_BLOCKS = 576;  // ~4 blocks per SM of an H100 (132) or H200
constexpr int DBIAS_MAX_CHUNKS = 256;
inline size_t dbias_wide_partials_max(int channels) {
    const size_t OC = 4 * (size_t)channels, a = DBIAS_ROW_CHUNKS * OC, b = (size_t)DBIAS_TARGET_BLOCKS * 256 + OC;
    return a > b ? a : b;
}

// Bytes of ctx.workspace our own kernels need for micro-batches of BT tokens.
// Kernels run one after another on the rank's stream, so the largest single
// user sets the size:
//   encoder backward: the host-built token buckets (4*BT + 4 ints); with
//     encoder_split > 0 (its split run), encoder_split_workspace_bytes
//   layernorm backward: LN_BWD_BLOCKS x 2C fp32 partial sums
//   matmul backward dbias: DBIAS_ROW_CHUNKS x 4C fp32 partial sums (the widest biased matmul is fc, OC = 4C);
//     with wide_dbias, dbias_wide_partials_max
//   sumsq: SUMSQ_BLOCKS fp32 partial sums
// (encoder_split and wide_dbias: ZERO_VARIANTS's, zero/base/variants.h)
inline size_t own_kernel_workspace_bytes(size_t BT, int channels, int num_heads, int encoder_split = 0,
                                         bool wide_dbias = false) {
    const size_t C = (size_t)channels;
    size_t enc = encoder_split > 0 ? encoder_split_workspace_bytes(BT, channels, encoder_split)
                                   : (4 * BT + 4) * sizeof(int);
    size_t ln = (size_t)LN_BWD_BLOCKS * 2 * C * sizeof(float);
    size_t dbias = (wide_dbias ? dbias_wide_partials_max(channels) : (size_t)DBIAS_ROW_CHUNKS * 4 * C) * sizeof(float);
    size_t ss = (size_t)SUMSQ_BLOCKS * sizeof(float);
    size_t attn = BT * (size_t)num_heads * sizeof(float);  // attention backward: D = rowsum(dout * out)
    size_t m = enc;
    if (attn > m) m = attn;
    if (ln > m) m = ln;
    if (dbias > m) m = dbias;
    if (ss > m) m = ss;
    return round_up(m, 256);
}

// Checked slice of ctx.workspace for a kernel that needs `bytes` of scratch.
inline void* workspace_take(const KernelCtx& ctx, size_t bytes, const char* who) {
    CHECK(ctx.workspace != nullptr && bytes <= ctx.workspace_bytes,
          "%s needs %zu bytes of kernel workspace, the context has %zu", who, bytes, ctx.workspace_bytes);
    return ctx.workspace;
}

// ----------------------------------------------------------------------------
// Second pass of the deterministic column reductions (layernorm dweight/dbias,
// matmul dbias). The first pass leaves R rows of fp32 partial column sums,
// partials (R, M); this adds their sum to the outputs, rounding once:
//   out[m] = out[m] + sum_r partials[r, m]      (out = out0[m] for m < M0, else out1[m - M0])
// Block: 32 lanes over 32 consecutive columns (coalesced 128-byte rows) x 8
// warps; warp w sums partial rows w, w+8, w+16, ... in increasing order, then
// the 8 warp sums are added in warp order. Fixed shape, fixed order: the same
// bits on every run.
constexpr int COLSUM_WARPS = 8;

template <typename T>
__global__ void __launch_bounds__(COLSUM_WARPS * 32)
    finish_column_partials_kernel(T* out0, T* out1, int M0, const float* __restrict__ partials, int R, int M) {
    __shared__ float warp_sums[COLSUM_WARPS][32];
    const int lane = threadIdx.x % 32, w = threadIdx.x / 32;
    const int m = blockIdx.x * 32 + lane;
    float s = 0.0f;
    if (m < M) {
        const float* p = partials + m;
        int r = w;
        // eight rows' loads in flight per step; the adds stay in row order
        for (; r + 7 * COLSUM_WARPS < R; r += 8 * COLSUM_WARPS) {
            float v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u] = p[(size_t)(r + u * COLSUM_WARPS) * M];
#pragma unroll
            for (int u = 0; u < 8; u++) s += v[u];
        }
        for (; r < R; r += COLSUM_WARPS) s += p[(size_t)r * M];
    }
    warp_sums[w][lane] = s;
    __syncthreads();
    if (w == 0 && m < M) {
        float t = 0.0f;
#pragma unroll
        for (int k = 0; k < COLSUM_WARPS; k++) t += warp_sums[k][lane];
        T* o = m < M0 ? out0 + m : out1 + (m - M0);
        *o = from_float<T>(to_float(*o) + t);
    }
}

template <typename T>
inline void finish_column_partials(const KernelCtx& ctx, T* out0, T* out1, int M0, const float* partials, int R,
                                   int M) {
    finish_column_partials_kernel<T><<<cdiv(M, 32), COLSUM_WARPS * 32, 0, ctx.stream>>>(out0, out1, M0, partials, R, M);
    cudaLaunchCheck();
}
