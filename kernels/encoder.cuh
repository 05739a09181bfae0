// Token + position embeddings on the GPU, and their deterministic backward.
//
// Forward: one thread per 128-bit pack of an output row, grid-stride.
// Backward: no float atomics. On the host the (B,T) positions are bucketed by
// token (stable, so every bucket lists its positions in (b,t) order); the
// bucket list goes to ctx.workspace with one async copy on the stream. Then one
// warp owns one (token, 32-pack slice of C) pair, sums dout over the token's
// positions in order in fp32 registers (starting from the current dwte value,
// as the CPU twin does, so the two agree bit for bit) and writes dwte once. dwpe is
// the same with the "bucket" of position t being {b*T + t : b = 0..B-1}. Both
// are one launch; every output element has exactly one owner and a fixed
// summation order, so the result is bitwise reproducible.
//
// Split runs (split > 0; ZERO_VARIANTS=encoder_split): a token's run of more
// than `split` positions would be one warp's long serial sum, the step's tail
// when one token is frequent. It is cut into pieces of `split` positions, each
// a work item of its own whose sum goes to a row of fp32 partial sums in the
// workspace; a second launch adds each long run's pieces in order and adds the
// rounded total to the row. The pieces are fixed by the tokens, so the bits
// are too (the CPU twin's split order, kernels/cpu/encoder.h).
#pragma once

#include <algorithm>
#include <vector>

#include "kernels/cuda_common.cuh"

// ----------------------------------------------------------------------------
// forward: out (B,T,C) = wte[tokens] (Vp,C) + wpe[t] (maxT,C)

template <typename T, bool VEC>
__global__ void encoder_forward_kernel(T* __restrict__ out, const int* __restrict__ tokens, const T* __restrict__ wte,
                                       const T* __restrict__ wpe, int BT, int T_, int C) {
    constexpr int X = VEC ? Packed128<T>::size : 1;
    const int packs_per_row = C / X;
    const size_t total = (size_t)BT * packs_per_row;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += stride) {
        const int bt = (int)(p / packs_per_row);
        const int c = (int)(p % packs_per_row) * X;
        const int t = bt % T_;
        const size_t tok = (size_t)__ldg(tokens + bt);
        if constexpr (VEC) {
            Packed128<T> a = load128ro(wte + tok * C + c);
            Packed128<T> b = load128ro(wpe + (size_t)t * C + c);
            Packed128<T> o;
#pragma unroll
            for (int k = 0; k < X; k++) o.set(k, a.get(k) + b.get(k));
            store128(out + (size_t)bt * C + c, o);
        } else {
            out[(size_t)bt * C + c] = from_float<T>(to_float(wte[tok * C + c]) + to_float(wpe[(size_t)t * C + c]));
        }
    }
}

template <typename T>
void encoder_forward_cuda(const KernelCtx& ctx, T* out, const int* tokens, const T* wte, const T* wpe, int B, int T_,
                          int C) {
    const int BT = B * T_;
    if (BT == 0) return;
    const int block = 256;
    constexpr int X = Packed128<T>::size;
    if (C % X == 0 && aligned16(out) && aligned16(wte) && aligned16(wpe)) {
        encoder_forward_kernel<T, true>
            <<<grid_for((size_t)BT * (C / X), block), block, 0, ctx.stream>>>(out, tokens, wte, wpe, BT, T_, C);
    } else {
        encoder_forward_kernel<T, false>
            <<<grid_for((size_t)BT * C, block), block, 0, ctx.stream>>>(out, tokens, wte, wpe, BT, T_, C);
    }
    cudaLaunchCheck();
}

// ----------------------------------------------------------------------------
// backward

// The bucket description in ctx.workspace (ints):
//   order[n]                  the n positions b*T+t whose token is in range, sorted by (row, position)
//   runs[3*R]                 (row, begin, end) per distinct token: order[begin, end) are its positions;
//                             runs sorted by length, longest first, so that the
//                             longest serial sums are scheduled first
// Split, runs are work items: a run of at most `split` positions as above, or
// one piece of a longer run with row = -1 - (its row of partial sums); then
//   long_runs[3*L]            (row, first partial row, pieces) per long run
//   partials[P*C]             fp32, 16-byte aligned after the ints
// (Sizes: encoder_split_ints and encoder_split_workspace_bytes, kernels/cuda_common.cuh.)
constexpr size_t encoder_backward_workspace_ints(size_t BT) { return 4 * BT + 4; }

// One warp per work item. Items [0, R*nslices): dwte runs; items [R*nslices,
// (R+T)*nslices): dwpe positions. A slice is 32 lanes x X channels.
template <typename T, bool VEC>
__global__ void __launch_bounds__(128)
    encoder_backward_kernel(T* dwte, T* dwpe, const T* __restrict__ dout, const int* __restrict__ order,
                            const int* __restrict__ runs, int R, int B, int T_, int C, float* partials) {
    constexpr int X = VEC ? Packed128<T>::size : 1;
    const int nslices = cdiv(C, 32 * X);
    const long long item = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (item >= (long long)(R + T_) * nslices) return;
    const int slice = (int)(item % nslices);
    const int c = (slice * 32 + lane) * X;
    if (c >= C) return;

    // A dwpe sum starts from the current gradient and adds the rows in order; a
    // dwte sum starts from zero, and its rounded result is added to the row: the
    // same association as the CPU twin, so both give the same bits.
    float acc[X];
    auto start_from = [&](const T* row) {
        if constexpr (VEC) {
            Packed128<T> w = load128(row);
#pragma unroll
            for (int k = 0; k < X; k++) acc[k] = w.get(k);
        } else {
            acc[0] = to_float(*row);
        }
    };
    auto start_from_zero = [&]() {
#pragma unroll
        for (int k = 0; k < X; k++) acc[k] = 0.0f;
    };
    auto add_row = [&](int pos) {
        if constexpr (VEC) {
            Packed128<T> d = load128cs(dout + (size_t)pos * C + c);
#pragma unroll
            for (int k = 0; k < X; k++) acc[k] += d.get(k);
        } else {
            acc[0] += to_float(dout[(size_t)pos * C + c]);
        }
    };

    T* row;
    const int r = (int)(item / nslices);
    const int token = r < R ? runs[3 * r] : 0;
    if (r < R) {
        const int begin = runs[3 * r + 1], end = runs[3 * r + 2];
        row = dwte + (size_t)(token < 0 ? 0 : token) * C + c;
        start_from_zero();
        int i = begin;
        // four positions' loads in flight per step; they are added in order
        for (; i + 4 <= end; i += 4) {
            int p0 = order[i], p1 = order[i + 1], p2 = order[i + 2], p3 = order[i + 3];
            if constexpr (VEC) {
                Packed128<T> d0 = load128cs(dout + (size_t)p0 * C + c);
                Packed128<T> d1 = load128cs(dout + (size_t)p1 * C + c);
                Packed128<T> d2 = load128cs(dout + (size_t)p2 * C + c);
                Packed128<T> d3 = load128cs(dout + (size_t)p3 * C + c);
#pragma unroll
                for (int k = 0; k < X; k++) {
                    acc[k] += d0.get(k);
                    acc[k] += d1.get(k);
                    acc[k] += d2.get(k);
                    acc[k] += d3.get(k);
                }
            } else {
                add_row(p0), add_row(p1), add_row(p2), add_row(p3);
            }
        }
        for (; i < end; i++) add_row(order[i]);
    } else {
        const int t = r - R;
        row = dwpe + (size_t)t * C + c;
        start_from(row);
        for (int b = 0; b < B; b++) add_row(b * T_ + t);
    }

    if (r < R && token < 0) {  // a piece of a split run: its sum to its row of partial sums
        float* part = partials + (size_t)(-1 - token) * C + c;
#pragma unroll
        for (int k = 0; k < X; k++) part[k] = acc[k];
        return;
    }
    if (r < R) {  // dwte: the run's rounded sum added to the row
        if constexpr (VEC) {
            Packed128<T> w = load128(row);
#pragma unroll
            for (int k = 0; k < X; k++) acc[k] = w.get(k) + to_float(from_float<T>(acc[k]));
        } else {
            acc[0] = to_float(*row) + to_float(from_float<T>(acc[0]));
        }
    }
    if constexpr (VEC) {
        Packed128<T> w;
#pragma unroll
        for (int k = 0; k < X; k++) w.set(k, acc[k]);
        store128(row, w);
    } else {
        *row = from_float<T>(acc[0]);
    }
}

// Split runs, second launch: one warp per (long run, slice of C) adds the run's
// partial rows in order from zero and adds the rounded total to the dwte row,
// as the unsplit kernel does with its one sum.
template <typename T>
__global__ void __launch_bounds__(128)
    encoder_backward_split_finish_kernel(T* dwte, const float* __restrict__ partials,
                                         const int* __restrict__ long_runs, int L, int C) {
    const int nslices = cdiv(C, 32);
    const long long item = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (item >= (long long)L * nslices) return;
    const int r = (int)(item / nslices), c = (int)(item % nslices) * 32 + threadIdx.x % 32;
    if (c >= C) return;
    const int token = long_runs[3 * r], first = long_runs[3 * r + 1], pieces = long_runs[3 * r + 2];
    float acc = 0.0f;
    for (int j = 0; j < pieces; j++) acc += partials[(size_t)(first + j) * C + c];
    T* row = dwte + (size_t)token * C + c;
    *row = from_float<T>(to_float(*row) + to_float(from_float<T>(acc)));
}

// Pinned host staging for the bucket description. The copy to the device is
// asynchronous, so the staging buffer must stay untouched until the copy has
// run: an event recorded after the copy is waited on before the next reuse
// (by then a whole step has passed, so the wait costs nothing). One per host
// thread (each emulated rank is a thread with its own stream), created on
// first use and grown when a larger batch arrives.
struct EncoderStaging {
    int* host = nullptr;
    size_t capacity = 0;  // ints
    cudaEvent_t copied = nullptr;
    int device = -1;
    ~EncoderStaging() {  // at thread exit; errors are ignored (the context may already be gone)
        if (copied) {
            cudaEventSynchronize(copied);
            cudaEventDestroy(copied);
        }
        if (host) cudaFreeHost(host);
    }
    int* acquire(size_t ints) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        if (copied) cudaCheck(cudaEventSynchronize(copied));  // the previous copy has read the buffer
        if (copied && dev != device) {
            cudaCheck(cudaEventDestroy(copied));
            copied = nullptr;
        }
        if (!copied) {
            cudaCheck(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
            device = dev;
        }
        if (ints > capacity) {
            if (host) cudaCheck(cudaFreeHost(host));
            size_t cap = ints + ints / 2;
            cudaCheck(cudaHostAlloc((void**)&host, cap * sizeof(int), cudaHostAllocPortable));
            capacity = cap;
        }
        return host;
    }
};

// The host part of the backward, over the positions whose token lies in
// [v0, v0 + Vl) (every position when Vl < 0): dwte's rows are token - v0, so a
// rank of a tensor group passes its own rows of wte (the vocabulary-parallel
// embedding, kernels/vocab_parallel.cuh). Positions outside the range add
// nothing to dwte; dwpe gets every position.
template <typename T>
void encoder_backward_range_cuda(const KernelCtx& ctx, T* dwte, T* dwpe, const T* dout, const int* tokens_host, int B,
                                 int T_, int C, int v0, int Vl, int split = 0) {
    const int BT = B * T_;
    if (BT == 0) return;
    const size_t ints = split > 0 ? encoder_split_ints((size_t)BT, split) : encoder_backward_workspace_ints((size_t)BT);
    const size_t bytes = split > 0 ? encoder_split_workspace_bytes((size_t)BT, C, split) : ints * sizeof(int);
    int* dev_buf = (int*)workspace_take(ctx, bytes, "encoder_backward");
    float* partials = split > 0 ? (float*)((char*)dev_buf + round_up(ints * sizeof(int), 16)) : nullptr;

    // bucket positions by token on the host: sort (row, position) keys
    std::vector<uint64_t> keys;
    keys.reserve(BT);
    for (int i = 0; i < BT; i++) {
        const int tok = tokens_host[i];
        if (Vl >= 0 && (tok < v0 || tok >= v0 + Vl)) continue;
        keys.push_back(((uint64_t)(uint32_t)(tok - (Vl >= 0 ? v0 : 0)) << 32) | (uint32_t)i);
    }
    std::sort(keys.begin(), keys.end());
    const int n = (int)keys.size();
    struct Run {
        int token, begin, end;
    };
    std::vector<Run> runs;
    for (int i = 0; i < n; i++) {
        int tok = (int)(keys[i] >> 32);
        if (runs.empty() || runs.back().token != tok) runs.push_back({tok, i, i});
        runs.back().end = i + 1;
    }
    std::vector<Run> long_runs;  // split: (row, first partial row, pieces) in Run's three ints
    if (split > 0) {  // each long run becomes its pieces, a work item each
        std::vector<Run> items;
        int parts = 0;
        for (const Run& r : runs) {
            if (r.end - r.begin <= split) {
                items.push_back(r);
                continue;
            }
            long_runs.push_back({r.token, parts, 0});
            for (int i = r.begin; i < r.end; i += split, parts++, long_runs.back().end++)
                items.push_back({-1 - parts, i, std::min(r.end, i + split)});
        }
        runs.swap(items);
    }
    std::stable_sort(runs.begin(), runs.end(),
                     [](const Run& a, const Run& b) { return a.end - a.begin > b.end - b.begin; });
    const int R = (int)runs.size(), L = (int)long_runs.size();

    thread_local EncoderStaging staging;
    int* h = staging.acquire(ints);
    for (int i = 0; i < n; i++) h[i] = (int)(uint32_t)keys[i];
    int* h_runs = h + n;
    for (int r = 0; r < R + L; r++) {
        const Run& x = r < R ? runs[r] : long_runs[r - R];
        h_runs[3 * r] = x.token;
        h_runs[3 * r + 1] = x.begin;
        h_runs[3 * r + 2] = x.end;
    }
    const size_t used = (size_t)n + 3 * (size_t)(R + L);
    if (used > 0) cudaCheck(cudaMemcpyAsync(dev_buf, h, used * sizeof(int), cudaMemcpyHostToDevice, ctx.stream));
    cudaCheck(cudaEventRecord(staging.copied, ctx.stream));

    const int block = 128;  // 4 warps, one work item each
    constexpr int X = Packed128<T>::size;
    const bool vec = C % X == 0 && aligned16(dwte) && aligned16(dwpe) && aligned16(dout);
    const int xw = vec ? X : 1;
    const long long warps = (long long)(R + T_) * cdiv(C, 32 * xw);
    const unsigned grid = (unsigned)cdiv(warps * 32, (long long)block);
    if (vec) {
        encoder_backward_kernel<T, true>
            <<<grid, block, 0, ctx.stream>>>(dwte, dwpe, dout, dev_buf, dev_buf + n, R, B, T_, C, partials);
    } else {
        encoder_backward_kernel<T, false>
            <<<grid, block, 0, ctx.stream>>>(dwte, dwpe, dout, dev_buf, dev_buf + n, R, B, T_, C, partials);
    }
    cudaLaunchCheck();
    if (L > 0) {
        const long long fwarps = (long long)L * cdiv(C, 32);
        const unsigned fgrid = (unsigned)cdiv(fwarps * 32, (long long)block);
        encoder_backward_split_finish_kernel<T>
            <<<fgrid, block, 0, ctx.stream>>>(dwte, partials, dev_buf + n + 3 * (size_t)R, L, C);
        cudaLaunchCheck();
    }
}

template <typename T>
void encoder_backward_cuda(const KernelCtx& ctx, T* dwte, T* dwpe, const T* dout, const int* tokens,
                           const int* tokens_host, int B, int T_, int C, int split) {
    (void)tokens;  // the device copy is not needed: the buckets are built from tokens_host
    encoder_backward_range_cuda(ctx, dwte, dwpe, dout, tokens_host, B, T_, C, 0, -1, split);
}
