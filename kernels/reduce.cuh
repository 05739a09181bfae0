// The small data-movement kernels on the GPU (kernels/cpu/reduce.h is the
// reference): the sum over peers' buffers behind the emulated collectives,
// accumulation into gradient slices, and the deterministic sum of squares.
// All elementwise ones are grid-stride with packed accesses, a scalar tail for
// n % pack, and a scalar kernel for unaligned pointers.
#pragma once

#include <vector>

#include "kernels/adamw.cuh"     // OptPiece, adamw_piece_blocks
#include "kernels/cpu/reduce.h"  // LOSS_TOTAL_LANES
#include "kernels/cuda_common.cuh"

// ----------------------------------------------------------------------------
// reduce_sum: dst (n) = sum over r of srcs[r] (n), fp32 in rank order, rounded once.
// The source pointers travel by value in the kernel's parameters.

constexpr int REDUCE_MAX_SRCS = 256;  // 2 KiB of pointers, well inside the kernel parameter limit

template <typename T>
struct ReduceSrcs {
    const T* p[REDUCE_MAX_SRCS];
};

// dst may be one of the srcs: each element is read from every source and then
// written by the same thread.
template <typename T, bool VEC>
__global__ void __launch_bounds__(256) reduce_sum_kernel(T* dst, const ReduceSrcs<T> srcs, int nsrc, size_t n) {
    constexpr int X = Packed128<T>::size;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (VEC) {
        const size_t npack = n / X;
        for (size_t q = tid; q < npack; q += stride) {
            float acc[X];
#pragma unroll
            for (int e = 0; e < X; e++) acc[e] = 0.0f;
            for (int r = 0; r < nsrc; r++) {
                Packed128<T> a = load128cs(srcs.p[r] + q * X);
#pragma unroll
                for (int e = 0; e < X; e++) acc[e] += a.get(e);
            }
            Packed128<T> o;
#pragma unroll
            for (int e = 0; e < X; e++) o.set(e, acc[e]);
            store128cs(dst + q * X, o);
        }
        done = npack * X;
    }
    for (size_t i = done + tid; i < n; i += stride) {
        float acc = 0.0f;
        for (int r = 0; r < nsrc; r++) acc += to_float(srcs.p[r][i]);
        dst[i] = from_float<T>(acc);
    }
}

template <typename T>
void reduce_sum_cuda(const KernelCtx& ctx, T* dst, const T* const* srcs, int nsrc, size_t n) {
    if (n == 0) return;
    CHECK(nsrc >= 1 && nsrc <= REDUCE_MAX_SRCS, "reduce_sum: %d sources (1 to %d supported)", nsrc, REDUCE_MAX_SRCS);
    ReduceSrcs<T> s{};
    bool vec = aligned16(dst);
    for (int r = 0; r < nsrc; r++) {
        s.p[r] = srcs[r];
        vec = vec && aligned16(srcs[r]);
    }
    const int block = 256;
    if (vec) {
        reduce_sum_kernel<T, true><<<grid_for(n / Packed128<T>::size + 1, block), block, 0, ctx.stream>>>(dst, s, nsrc, n);
    } else {
        reduce_sum_kernel<T, false><<<grid_for(n, block), block, 0, ctx.stream>>>(dst, s, nsrc, n);
    }
    cudaLaunchCheck();
}

// ----------------------------------------------------------------------------
// accumulate: dst (n) += src (n) summed in fp32 and rounded once to Tdst, or
// dst = src when overwrite (accumulate_cuda, the dispatcher's: dst and src in the gradient dtype).

template <typename Tdst, typename Tsrc, bool VEC>
__global__ void __launch_bounds__(256)
    accumulate_kernel(Tdst* __restrict__ dst, const Tsrc* __restrict__ src, size_t n, bool overwrite) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (VEC) {
        const size_t n4 = n / 4;
        for (size_t q = tid; q < n4; q += stride) {
            Packed4<Tsrc> a = load4cs(src + q * 4);
            Packed4<Tdst> d;
            if (overwrite) {
#pragma unroll
                for (int e = 0; e < 4; e++) d.set(e, a.get(e));
            } else {
                d = load4cs(dst + q * 4);
#pragma unroll
                for (int e = 0; e < 4; e++) d.set(e, d.get(e) + a.get(e));
            }
            store4cs(dst + q * 4, d);
        }
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride)
        dst[i] = from_float<Tdst>(overwrite ? to_float(src[i]) : to_float(dst[i]) + to_float(src[i]));
}

template <typename T>
void accumulate_cuda(const KernelCtx& ctx, T* dst, const T* src, size_t n, bool overwrite) {
    if (n == 0) return;
    if (overwrite) {  // an exact copy (bit for bit, NaN payloads included)
        cudaCheck(cudaMemcpyAsync(dst, src, n * sizeof(T), cudaMemcpyDeviceToDevice, ctx.stream));
        return;
    }
    const int block = 256;
    if (aligned_to(dst, 4 * sizeof(T)) && aligned_to(src, 4 * sizeof(T))) {
        accumulate_kernel<T, T, true><<<grid_for(n / 4 + 1, block), block, 0, ctx.stream>>>(dst, src, n, overwrite);
    } else {
        accumulate_kernel<T, T, false><<<grid_for(n, block), block, 0, ctx.stream>>>(dst, src, n, overwrite);
    }
    cudaLaunchCheck();
}

// ----------------------------------------------------------------------------
// sumsq: out[0] (device) = sum of squares of x (n).
// Pass 1: a grid of nb = min(SUMSQ_BLOCKS, ceil(n / SUMSQ_PER_BLOCK)) blocks
// (a function of n only); thread t of the grid sums the squares of packs t,
// t + grid, ... in fp32; the block adds its threads with a fixed tree into
// partials[block] (ctx.workspace). Pass 2: one block adds the nb partials in
// double with a fixed tree. Fixed grid, fixed order: reproducible bits. An inf
// or NaN element makes the sum inf or NaN (squares are >= 0, so no inf - inf).
// sumsq_pieces_cuda does both passes for every piece of a table at once, each
// piece's blocks exactly as its own sumsq_cuda's: the same bits per piece.

constexpr size_t SUMSQ_PER_BLOCK = 16384;  // elements per pass-1 block, at least
constexpr int SUMSQ_THREADS = 256;
__host__ __device__ __forceinline__ unsigned sumsq_blocks(size_t n) {
    const size_t want = (n + SUMSQ_PER_BLOCK - 1) / SUMSQ_PER_BLOCK;
    return (unsigned)(want < (size_t)SUMSQ_BLOCKS ? want : (size_t)SUMSQ_BLOCKS);
}

// Block `block` of a pass-1 grid of `grid` blocks over x (n): the block's sum.
template <typename T, bool VEC>
__device__ __forceinline__ float sumsq_block(const T* __restrict__ x, size_t n, unsigned block, unsigned grid) {
    constexpr int X = Packed128<T>::size;
    const size_t stride = (size_t)grid * blockDim.x;
    const size_t tid = (size_t)block * blockDim.x + threadIdx.x;
    float s = 0.0f;
    size_t done = 0;
    if (VEC) {
        const size_t npack = n / X;
        for (size_t q = tid; q < npack; q += stride) {
            Packed128<T> a = load128cs(x + q * X);
#pragma unroll
            for (int e = 0; e < X; e++) {
                float f = a.get(e);
                s += f * f;
            }
        }
        done = npack * X;
    }
    for (size_t i = done + tid; i < n; i += stride) {
        float f = to_float(x[i]);
        s += f * f;
    }
    return block_reduce_sum(s);
}

template <typename T, bool VEC>
__global__ void __launch_bounds__(SUMSQ_THREADS) sumsq_partials_kernel(float* __restrict__ partials, const T* __restrict__ x, size_t n) {
    const float s = sumsq_block<T, VEC>(x, n, blockIdx.x, gridDim.x);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}

__device__ __forceinline__ double warp_reduce_sum_f64(double v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Pass 2 in one block: the sum of partials (nb), in thread 0.
__device__ __forceinline__ float sumsq_finish_block(const float* __restrict__ partials, int nb) {
    __shared__ double slots[SUMSQ_THREADS / 32];
    double s = 0.0;
    for (int i = threadIdx.x; i < nb; i += blockDim.x) s += (double)partials[i];
    s = warp_reduce_sum_f64(s);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) slots[warp] = s;
    __syncthreads();
    double t = 0.0;
    if (threadIdx.x == 0)
        for (int w = 0; w < SUMSQ_THREADS / 32; w++) t += slots[w];
    return (float)t;
}

static __global__ void __launch_bounds__(SUMSQ_THREADS) sumsq_finish_kernel(float* out, const float* __restrict__ partials, int nb) {
    const float t = sumsq_finish_block(partials, nb);
    if (threadIdx.x == 0) out[0] = t;
}

template <typename T>
void sumsq_cuda(const KernelCtx& ctx, float* out, const T* x, size_t n) {
    if (n == 0) {
        cudaCheck(cudaMemsetAsync(out, 0, sizeof(float), ctx.stream));
        return;
    }
    const int nb = (int)sumsq_blocks(n);
    float* partials = (float*)workspace_take(ctx, (size_t)nb * sizeof(float), "sumsq");
    if (aligned16(x)) {
        sumsq_partials_kernel<T, true><<<nb, SUMSQ_THREADS, 0, ctx.stream>>>(partials, x, n);
    } else {
        sumsq_partials_kernel<T, false><<<nb, SUMSQ_THREADS, 0, ctx.stream>>>(partials, x, n);
    }
    cudaLaunchCheck();
    sumsq_finish_kernel<<<1, SUMSQ_THREADS, 0, ctx.stream>>>(out, partials, nb);
    cudaLaunchCheck();
}

// The table's pieces (grad, n; first_block from sumsq_blocks) as pass-1 blocks
// of one launch, then one pass-2 block per piece: out[i] = piece i's sum.
template <typename T>
__global__ void __launch_bounds__(SUMSQ_THREADS)
    sumsq_pieces_partials_kernel(float* __restrict__ partials, const OptPiece<T>* __restrict__ pieces, int npieces) {
    const OptPiece<T> p = pieces[piece_of_block(pieces, npieces, blockIdx.x)];
    const unsigned b = blockIdx.x - p.first_block, nb = sumsq_blocks(p.n);
    const float s = p.vec ? sumsq_block<T, true>(p.grad, p.n, b, nb) : sumsq_block<T, false>(p.grad, p.n, b, nb);
    if (threadIdx.x == 0) partials[blockIdx.x] = s;
}
template <typename T>
__global__ void __launch_bounds__(SUMSQ_THREADS)
    sumsq_pieces_finish_kernel(float* out, const float* __restrict__ partials, const OptPiece<T>* __restrict__ pieces) {
    const OptPiece<T> p = pieces[blockIdx.x];
    const float t = sumsq_finish_block(partials + p.first_block, (int)sumsq_blocks(p.n));
    if (threadIdx.x == 0) out[blockIdx.x] = t;
}

// A table's first blocks for the launch it serves, the norm's (sumsq_pieces_cuda)
// or AdamW's (adamw_pieces_cuda, whose states are at master, m, v), and
// whether each piece's pointers allow the packed accesses; the launch's blocks.
template <typename T>
unsigned lay_out_pieces_cuda(std::vector<OptPiece<T>>& pieces, bool norm, const float* master, const float* m,
                             const float* v) {
    unsigned blocks = 0;
    for (OptPiece<T>& p : pieces) {
        p.first_block = blocks;
        if (norm) {
            p.vec = aligned16(p.grad);
            blocks += sumsq_blocks(p.n);
        } else {
            p.vec = aligned16(master + p.states) && aligned16(m + p.states) && aligned16(v + p.states) &&
                    aligned_to(p.grad, 4 * sizeof(T)) && aligned_to(p.param, 4 * sizeof(T));
            blocks += adamw_piece_blocks(p.n);
        }
    }
    return blocks;
}

template <typename T>
void sumsq_pieces_cuda(const KernelCtx& ctx, float* out, const OptPiece<T>* pieces, int npieces, unsigned blocks) {
    if (npieces == 0) return;
    float* partials = (float*)workspace_take(ctx, (size_t)blocks * sizeof(float), "sumsq over the optimizer's pieces");
    if (blocks > 0)
        sumsq_pieces_partials_kernel<T><<<blocks, SUMSQ_THREADS, 0, ctx.stream>>>(partials, pieces, npieces);
    cudaLaunchCheck();
    sumsq_pieces_finish_kernel<T><<<npieces, SUMSQ_THREADS, 0, ctx.stream>>>(out, partials, pieces);
    cudaLaunchCheck();
}

// ----------------------------------------------------------------------------
// loss_total: out[0] (a device double) = the sum of x (n floats) in
// kernels/cpu/reduce.h's fixed tree: one block of LOSS_TOTAL_LANES threads,
// thread t's double sum of x[t], x[t + 1024], ... in order, the warps'
// butterflies, then one butterfly over the 32 warps. out may be x's first 8
// bytes: every thread has read its elements before the one write.

static __global__ void __launch_bounds__(LOSS_TOTAL_LANES) loss_total_kernel(double* out, const float* x, size_t n) {
    __shared__ double warps[LOSS_TOTAL_LANES / 32];
    double s = 0.0;
    for (size_t i = threadIdx.x; i < n; i += LOSS_TOTAL_LANES) s += (double)x[i];
    s = warp_reduce_sum_f64(s);
    if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = s;
    __syncthreads();
    if (threadIdx.x < 32) {
        s = warp_reduce_sum_f64(warps[threadIdx.x]);
        if (threadIdx.x == 0) out[0] = s;
    }
}

inline void loss_total_cuda(const KernelCtx& ctx, double* out, const float* x, size_t n) {
    loss_total_kernel<<<1, LOSS_TOTAL_LANES, 0, ctx.stream>>>(out, x, n);
    cudaLaunchCheck();
}
