// CPU kernels of the vocabulary-parallel embedding and cross-entropy: each
// rank of a tensor group holds Vl = Vp/t consecutive rows of wte, starting at
// padded-vocabulary row v0, and so Vl columns of the logits. The kernels work
// on those; the collectives between them are the model's
// (zero/model/vocab_parallel.h).
#pragma once

#include <cmath>
#include <vector>

#include "kernels/cpu/encoder.h"
#include "zero/base/dtype.h"

// The per-element math, shared with the CUDA kernels (kernels/vocab_parallel.cuh),
// so both builds compute the same expressions.

// Columns of real tokens among this rank's Vl (global columns [v0, v0+Vl) below V).
HD int vocab_real_columns(int V, int v0, int Vl) { return V - v0 < Vl ? (V - v0 > 0 ? V - v0 : 0) : Vl; }

// One output element of the embedding: the token's row if this rank holds it,
// plus the position's row when add_wpe; fp32, rounded once by the caller.
HD float encoder_vocab_value(bool mine, float wte_x, bool add_wpe, float wpe_x) {
    return (mine ? wte_x : 0.0f) + (add_wpe ? wpe_x : 0.0f);
}

// One dlogit of a real column: (softmax - onehot) * dloss, with
// scale = dloss / sum_exp over the group.
HD float vocab_parallel_dlogit(float x, float global_max, float scale, bool is_target, float dloss) {
    return expf(x - global_max) * scale - (is_target ? dloss : 0.0f);
}

// A row's loss: log-sum-exp over the group minus the target's logit.
HD float vocab_parallel_loss(float global_max, float sum_exp, float target_logit) {
    return global_max + logf(sum_exp) - target_logit;
}

// out[b,t,:] = wte_local[tokens[b,t] - v0,:] when this rank holds the token,
// else 0; plus wpe[t,:] when add_wpe. Summed over the group, every position
// gets its token's row once and its position's row once (add_wpe on one rank).
template <typename T>
void encoder_forward_vocab_cpu(T* out,              // (B, T, C)
                               const int* tokens,   // (B, T)
                               const T* wte_local,  // (Vl, C)
                               const T* wpe,        // (maxT, C)
                               int B, int T_, int C, int v0, int Vl, bool add_wpe) {
#pragma omp parallel for schedule(static)
    for (int bt = 0; bt < B * T_; bt++) {
        int v = tokens[bt] - v0;
        bool mine = v >= 0 && v < Vl;
        const T* wt = wte_local + (size_t)(mine ? v : 0) * C;
        const T* wp = wpe + (size_t)(bt % T_) * C;
        T* o = out + (size_t)bt * C;
        for (int c = 0; c < C; c++)
            o[c] = from_float<T>(encoder_vocab_value(mine, to_float(wt[c]), add_wpe, to_float(wp[c])));
    }
}

// Phase 1 of the cross-entropy, per row i: the largest logit this rank holds
// among the real vocabulary (global column < V; -inf if it holds none), and
// the target's logit if this rank holds the target's column (else 0).
template <typename T>
void vocab_parallel_local_stats_cpu(float* row_max,       // (BT)
                                    float* target_logit,  // (BT)
                                    const T* logits,      // (BT, Vl)
                                    const int* targets,   // (BT)
                                    int BT, int Vl, int v0, int V) {
    int real = vocab_real_columns(V, v0, Vl);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++) {
        const T* row = logits + (size_t)i * Vl;
        float m = -INFINITY;
        for (int v = 0; v < real; v++) m = to_float(row[v]) > m ? to_float(row[v]) : m;
        row_max[i] = m;
        int tv = targets[i] - v0;
        target_logit[i] = tv >= 0 && tv < Vl ? to_float(row[tv]) : 0.0f;
    }
}

// Phase 2: the row's global max from every rank's (gathered: (t, BT), rank k's
// at k*BT), and this rank's sum of exp(logit - max) over its real columns.
template <typename T>
void vocab_parallel_sum_exp_cpu(float* global_max,        // (BT)
                                float* sum_exp,           // (BT)
                                const float* gathered,    // (t, BT)
                                const T* logits,          // (BT, Vl)
                                int t, int BT, int Vl, int v0, int V) {
    int real = vocab_real_columns(V, v0, Vl);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++) {
        float m = -INFINITY;
        for (int k = 0; k < t; k++) m = gathered[(size_t)k * BT + i] > m ? gathered[(size_t)k * BT + i] : m;
        global_max[i] = m;
        const T* row = logits + (size_t)i * Vl;
        float s = 0.0f;
        for (int v = 0; v < real; v++) s += expf(to_float(row[v]) - m);
        sum_exp[i] = s;
    }
}

// Phase 3, with the group's sums: losses[i] = max + log(sum) - target logit
// (on every rank alike), and if dloss != 0 this rank's logits become
// (softmax - onehot) * dloss over its real columns and 0 over its padding.
template <typename T>
void vocab_parallel_finish_cpu(T* logits,                  // (BT, Vl): in logits, out dlogits
                               float* losses,              // (BT)
                               const int* targets,         // (BT)
                               const float* global_max,    // (BT)
                               const float* sum_exp,       // (BT): over the group
                               const float* target_logit,  // (BT): over the group
                               int BT, int Vl, int v0, int V, float dloss) {
    int real = vocab_real_columns(V, v0, Vl);
#pragma omp parallel for schedule(static)
    for (int i = 0; i < BT; i++) {
        float m = global_max[i], sum = sum_exp[i];
        losses[i] = vocab_parallel_loss(m, sum, target_logit[i]);
        if (dloss == 0.0f) continue;
        T* row = logits + (size_t)i * Vl;
        float scale = dloss / sum;
        int tv = targets[i] - v0;
        for (int v = 0; v < real; v++)
            row[v] = from_float<T>(vocab_parallel_dlogit(to_float(row[v]), m, scale, v == tv, dloss));
        for (int v = real; v < Vl; v++) row[v] = from_float<T>(0.0f);
    }
}

// dwte_local[tokens[b,t] - v0,:] += dout[b,t,:] for the tokens this rank holds,
// dwpe[t,:] += sum over b of dout[b,t,:] (replicated: dout is the same on every
// rank of the group): encoder_backward_cpu restricted to this rank's rows.
template <typename T>
void encoder_backward_vocab_cpu(T* dwte_local, T* dwpe,  // (Vl, C), (maxT, C): accumulated into
                                const T* dout,      // (B, T, C)
                                const int* tokens,  // (B, T)
                                int B, int T_, int C, int v0, int Vl, int split = 0) {
    encoder_backward_cpu(dwte_local, dwpe, dout, tokens, B, T_, C, v0, Vl, split);
}
