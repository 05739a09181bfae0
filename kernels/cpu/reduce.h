// CPU twins of the small data-movement kernels: sums over peers' buffers (the
// emulated collectives), casts, accumulation into gradient slices, sum of squares.
#pragma once

#include <cmath>
#include <algorithm>
#include <cstddef>
#include <vector>

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

template <typename Tdst, typename Tsrc>
void cast_cpu(Tdst* dst, const Tsrc* src, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = from_float<Tdst>(to_float(src[i]));
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
