// CPU twin of the encoder: token + position embeddings, and their gradients.
// The reference the CUDA kernels are checked against. fp32 arithmetic; each
// output element is rounded to T once.
#pragma once

#include <algorithm>
#include <climits>
#include <vector>

#include "zero/base/dtype.h"

// out[b,t,:] = wte[tokens[b,t],:] + wpe[t,:]
template <typename T>
void encoder_forward_cpu(T* out,             // (B, T, C)
                         const int* tokens,  // (B, T)
                         const T* wte,       // (Vp, C)
                         const T* wpe,       // (maxT, C)
                         int B, int T_, int C) {
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T_; bt++) {
        const T* wt = wte + (size_t)tokens[bt] * C;
        const T* wp = wpe + (size_t)(bt % T_) * C;
        T* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++) o[c] = from_float<T>(to_float(wt[c]) + to_float(wp[c]));
    }
}

// dwte[v - v0,:] += sum of dout[b,t,:] over positions with token v (in (b,t) order),
//                   for the tokens v in [v0, v0 + Vl) (every token by default;
//                   a tensor-parallel rank passes its vocabulary rows)
// dwpe[t,:] += sum over b of dout[b,t,:]
// Deterministic: each row of dwte/dwpe is owned by one thread and summed in a
// fixed order in fp32. A dwpe row starts from its current value and is rounded
// once. A dwte row's sum starts from zero and is rounded, then added to the row
// (rounded again): the encoder's gradient is a tensor of its own added to the
// LM head's (which shares wte), as it is when the two sit on different pipeline
// stages and meet in an all-reduce (zero/engine/zero_engine.h). No atomics.
//
// split > 0 (ZERO_VARIANTS=encoder_split; the CUDA kernel's split runs): a
// token's run of more than `split` positions is cut into pieces of `split`
// (the last shorter), each summed from zero in order, and the pieces' sums are
// added in order; runs of at most `split` positions sum as without. Another
// order than the default, so other bits, fixed by the tokens alone.
constexpr int ENCODER_SPLIT_RUN = 256;  // positions a CUDA warp sums alone, at most, when split
template <typename T>
void encoder_backward_cpu(T* dwte, T* dwpe,    // (Vp or Vl, C), (maxT, C): accumulated into
                          const T* dout,       // (B, T, C)
                          const int* tokens,   // (B, T)
                          int B, int T_, int C, int v0 = 0, int Vl = INT_MAX, int split = 0) {
    int BT = B * T_;
    // the positions of the tokens in range, sorted by token, stable so each
    // token's positions stay in (b,t) order
    std::vector<int> order;
    for (int i = 0; i < BT; i++)
        if (tokens[i] >= v0 && tokens[i] - v0 < Vl) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return tokens[a] < tokens[b]; });
    const int n = (int)order.size();
    std::vector<int> run_start;  // start of each run of equal tokens in `order`
    for (int i = 0; i < n; i++)
        if (i == 0 || tokens[order[i]] != tokens[order[i - 1]]) run_start.push_back(i);
    run_start.push_back(n);
    int runs = (int)run_start.size() - 1;

#pragma omp parallel
    {
        std::vector<float> acc(C), part(C);
        // positions [i, end) of `order` summed from zero, in order, into `into`
        auto sum_run = [&](std::vector<float>& into, int i, int end) {
            for (int c = 0; c < C; c++) into[c] = 0.0f;
            for (; i < end; i++) {
                const T* d = dout + (size_t)order[i] * C;
                for (int c = 0; c < C; c++) into[c] += to_float(d[c]);
            }
        };
#pragma omp for schedule(static)
        for (int r = 0; r < runs; r++) {
            T* row = dwte + (size_t)(tokens[order[run_start[r]]] - v0) * C;
            const int begin = run_start[r], end = run_start[r + 1];
            if (split <= 0 || end - begin <= split) {
                sum_run(acc, begin, end);
            } else {
                for (int c = 0; c < C; c++) acc[c] = 0.0f;
                for (int i = begin; i < end; i += split) {
                    sum_run(part, i, std::min(end, i + split));
                    for (int c = 0; c < C; c++) acc[c] += part[c];
                }
            }
            for (int c = 0; c < C; c++) row[c] = from_float<T>(to_float(row[c]) + to_float(from_float<T>(acc[c])));
        }
#pragma omp for schedule(static)
        for (int t = 0; t < T_; t++) {
            T* row = dwpe + (size_t)t * C;
            for (int c = 0; c < C; c++) acc[c] = to_float(row[c]);
            for (int b = 0; b < B; b++) {
                const T* d = dout + ((size_t)b * T_ + t) * C;
                for (int c = 0; c < C; c++) acc[c] += to_float(d[c]);
            }
            for (int c = 0; c < C; c++) row[c] = from_float<T>(acc[c]);
        }
    }
}
