// Fused AdamW on the GPU over one contiguous piece of a rank's shard: the same
// per-element arithmetic as kernels/cpu/adamw.h (it calls that file's
// adamw_update and round_param, so the formula, the order of the operations and
// the stochastic rounding of bf16 copies keyed on the element's full index are
// shared code), elementwise and memory bound.
//
// Each thread moves 4 elements per step: master, m, v as one 16-byte access
// each, the gradient and the compute copy as one 16-byte (fp32) or 8-byte
// (bf16/fp16) access; every access is a streaming one (the data is touched
// exactly once). Grid-stride over a grid that fills the GPU; a scalar loop
// takes the last n % 4 elements, and a scalar kernel takes pieces whose
// pointers are not aligned for the packed accesses.
#pragma once

#include "kernels/cpu/adamw.h"
#include "kernels/cuda_common.cuh"

// Elements i..i+3 (packed; every pointer aligned to its 4-element access) and
// element i alone: the per-element code both kernels below run.
template <typename Tg, typename Tp>
__device__ __forceinline__ void adamw_pack4(float* master, float* m, float* v, const Tg* grad, Tp* param, size_t i,
                                            const AdamWStep& s, size_t full_offset) {
    float4 w = __ldcs(reinterpret_cast<const float4*>(master + i));
    float4 mm = __ldcs(reinterpret_cast<const float4*>(m + i));
    float4 vv = __ldcs(reinterpret_cast<const float4*>(v + i));
    Packed4<Tg> g = load4cs(grad + i);
    float pw[4] = {w.x, w.y, w.z, w.w};
    float pm[4] = {mm.x, mm.y, mm.z, mm.w};
    float pv[4] = {vv.x, vv.y, vv.z, vv.w};
    Packed4<Tp> out;
#pragma unroll
    for (int e = 0; e < 4; e++) {
        float p = adamw_update(pw[e], pm[e], pv[e], g.get(e) * s.grad_scale, s);
        out.v[e] = round_param<Tp>(p, s.rounding_seed, full_offset + i + e);
    }
    __stcs(reinterpret_cast<float4*>(master + i), make_float4(pw[0], pw[1], pw[2], pw[3]));
    __stcs(reinterpret_cast<float4*>(m + i), make_float4(pm[0], pm[1], pm[2], pm[3]));
    __stcs(reinterpret_cast<float4*>(v + i), make_float4(pv[0], pv[1], pv[2], pv[3]));
    if (param) store4cs(param + i, out);
}
template <typename Tg, typename Tp>
__device__ __forceinline__ void adamw_one(float* master, float* m, float* v, const Tg* grad, Tp* param, size_t i,
                                          const AdamWStep& s, size_t full_offset) {
    float w = master[i], mm = m[i], vv = v[i];
    float p = adamw_update(w, mm, vv, to_float(grad[i]) * s.grad_scale, s);
    master[i] = w, m[i] = mm, v[i] = vv;
    if (param) param[i] = round_param<Tp>(p, s.rounding_seed, full_offset + i);
}

template <typename Tg, typename Tp, bool VEC>
__global__ void __launch_bounds__(256)
    adamw_kernel(float* __restrict__ master, float* __restrict__ m, float* __restrict__ v, const Tg* __restrict__ grad,
                 Tp* __restrict__ param, size_t n, const AdamWStep s, size_t full_offset) {
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    const size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (VEC) {
        const size_t n4 = n / 4;
        for (size_t q = tid; q < n4; q += stride) adamw_pack4(master, m, v, grad, param, q * 4, s, full_offset);
        done = n4 * 4;
    }
    for (size_t i = done + tid; i < n; i += stride) adamw_one(master, m, v, grad, param, i, s, full_offset);
}

// master, m, v (n) fp32 in place; grad (n); param (n) or null; element i of the
// piece is element full_offset + i of the full flat parameter buffer.
template <typename Tg, typename Tp>
void adamw_cuda(const KernelCtx& ctx, float* master, float* m, float* v, const Tg* grad, Tp* param, size_t n,
                const AdamWStep& step, size_t full_offset) {
    if (n == 0) return;
    const int block = 256;
    const bool vec = aligned16(master) && aligned16(m) && aligned16(v) && aligned_to(grad, 4 * sizeof(Tg)) &&
                     aligned_to(param, 4 * sizeof(Tp));
    if (vec) {
        adamw_kernel<Tg, Tp, true>
            <<<grid_for(n / 4 + 1, block), block, 0, ctx.stream>>>(master, m, v, grad, param, n, step, full_offset);
    } else {
        adamw_kernel<Tg, Tp, false>
            <<<grid_for(n, block), block, 0, ctx.stream>>>(master, m, v, grad, param, n, step, full_offset);
    }
    cudaLaunchCheck();
}

// ----------------------------------------------------------------------------
// Every piece of a table (kernels/cpu/adamw.h's OptPiece) in one launch: a
// block per ADAMW_PIECE_CHUNK elements of a piece, which finds its piece by
// binary search; the same per-element code and keys as adamw_cuda, so the same
// bits in any launch shape. (~15k blocks at GPT-2 124M, against 148 launches.)

constexpr size_t ADAMW_PIECE_CHUNK = 8192;  // elements per block: 8 packs of 4 per thread
inline unsigned adamw_piece_blocks(size_t n) { return (unsigned)ceil_div(n, ADAMW_PIECE_CHUNK); }

template <typename T>
__global__ void __launch_bounds__(256) adamw_pieces_kernel(const OptPiece<T>* __restrict__ pieces, int npieces,
                                                           float* master, float* m, float* v, AdamWStep s) {
    const OptPiece<T> p = pieces[piece_of_block(pieces, npieces, blockIdx.x)];
    if (!p.decay) s.weight_decay = 0.0f;
    const size_t lo = (size_t)(blockIdx.x - p.first_block) * ADAMW_PIECE_CHUNK;
    const size_t hi = lo + ADAMW_PIECE_CHUNK < p.n ? lo + ADAMW_PIECE_CHUNK : p.n;
    float *w = master + p.states, *pm = m + p.states, *pv = v + p.states;
    size_t done = lo;
    if (p.vec) {  // lo is a multiple of 4: the packs of [lo, hi), then the piece's last n % 4 alone
        done = lo + (hi - lo) / 4 * 4;
        for (size_t i = lo + 4 * threadIdx.x; i < done; i += 4 * blockDim.x)
            adamw_pack4(w, pm, pv, p.grad, p.param, i, s, p.key);
    }
    for (size_t i = done + threadIdx.x; i < hi; i += blockDim.x) adamw_one(w, pm, pv, p.grad, p.param, i, s, p.key);
}

// pieces: the table on the device, its blocks' total in `blocks`; master, m, v
// the rank's states (each piece's at its `states`); s.weight_decay the step's,
// applied to the pieces marked `decay`.
template <typename T>
void adamw_pieces_cuda(const KernelCtx& ctx, const OptPiece<T>* pieces, int npieces, unsigned blocks, float* master,
                       float* m, float* v, const AdamWStep& s) {
    if (blocks == 0) return;
    adamw_pieces_kernel<T><<<blocks, 256, 0, ctx.stream>>>(pieces, npieces, master, m, v, s);
    cudaLaunchCheck();
}
