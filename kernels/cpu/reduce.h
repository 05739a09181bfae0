// CPU twins of the small data-movement kernels: sums over peers' buffers (the
// emulated collectives), casts, accumulation into gradient slices, sum of squares.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cpu/adamw.h"  // OptPiece
#include "zero/base/dtype.h"

// dst[i] = sum over r in rank order of srcs[r][i], summed in fp32, rounded once.
// dst may be one of the srcs only if every rank writes a disjoint range.
template <typename T>
void reduce_sum_cpu(T* dst, const T* const* srcs, int nsrc, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int r = 0; r < nsrc; r++) acc += to_float(srcs[r][i]);
        dst[i] = from_float<T>(acc);
    }
}

// dst += src (summed in fp32, rounded once), or dst = src when `overwrite`
template <typename T>
void accumulate_cpu(T* dst, const T* src, size_t n, bool overwrite) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = overwrite ? src[i] : from_float<T>(to_float(dst[i]) + to_float(src[i]));
}

// Sum of squares in fixed blocks: each block summed in fp32 in order, blocks
// added in double in order, so the result does not depend on thread count.
// Infinite or NaN elements make the result non-finite (the overflow signal).
constexpr size_t SUMSQ_BLOCK = 4096;
template <typename T>
double sumsq_cpu(const T* x, size_t n) {
    size_t blocks = (n + SUMSQ_BLOCK - 1) / SUMSQ_BLOCK;
    std::vector<float> partial(blocks);
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < blocks; b++) {
        size_t end = std::min(n, (b + 1) * SUMSQ_BLOCK);
        float s = 0.0f;
        for (size_t i = b * SUMSQ_BLOCK; i < end; i++) {
            float v = to_float(x[i]);
            s += v * v;
        }
        partial[b] = s;
    }
    double total = 0.0;
    for (float s : partial) total += s;
    return total;
}

// out[i] = sumsq_cpu of piece i's gradient, rounded to fp32 (what the sumsq kernel writes), for each piece of a table
template <typename T>
void sumsq_pieces_cpu(float* out, const OptPiece<T>* pieces, int np) {
    for (int i = 0; i < np; i++) out[i] = (float)sumsq_cpu(pieces[i].grad, pieces[i].n);
}

// The sum of x (n floats) in double, in the fixed tree of the CUDA kernel
// (kernels/reduce.cuh, loss_total_cuda; ZERO_VARIANTS=device_loss): lane t of
// LOSS_TOTAL_LANES adds x[t], x[t + lanes], ... in order; each 32 lanes are
// combined by the butterfly of a warp's xor shuffles (at step `off` every lane
// adds the lane `off` away), as are the 32 warps' results. Another order than
// a plain loop's, so the last bits may differ from it; the same on both builds.
constexpr int LOSS_TOTAL_LANES = 1024;
inline double butterfly32(const double* v) {
    double a[32], b[32];
    for (int l = 0; l < 32; l++) a[l] = v[l];
    for (int off = 16; off > 0; off >>= 1) {
        for (int l = 0; l < 32; l++) b[l] = a[l] + a[l ^ off];
        for (int l = 0; l < 32; l++) a[l] = b[l];
    }
    return a[0];
}
inline double loss_total_cpu(const float* x, size_t n) {
    std::vector<double> lane(LOSS_TOTAL_LANES, 0.0);
#pragma omp parallel for schedule(static)
    for (int t = 0; t < LOSS_TOTAL_LANES; t++)
        for (size_t i = t; i < n; i += LOSS_TOTAL_LANES) lane[t] += (double)x[i];
    double warps[LOSS_TOTAL_LANES / 32];
    for (int w = 0; w < LOSS_TOTAL_LANES / 32; w++) warps[w] = butterfly32(lane.data() + 32 * w);
    return butterfly32(warps);
}
