// The in-process tests' data: a micro-batch of pseudo-random tokens that
// depends only on (step, micro-step, sequence of the global batch, position),
// so every grid (ranks, stages, tensor or pipeline degree) sees the same data
// however it splits the batch.
#pragma once

#include <cstdint>
#include <vector>

#include "zero/base/rng.h"

// Token j of sequence `seq` of the global batch of (step, micro).
inline int synthetic_token(int step, int micro, int seq, int j, int V) {
    return (int)(mix64(((uint64_t)step << 40) ^ ((uint64_t)micro << 32) ^ ((uint64_t)seq << 16) ^ (uint64_t)j) %
                 (uint64_t)V);
}

// Sequences first_seq .. first_seq + B - 1 of (step, micro), T tokens each:
// inputs and targets (the inputs shifted by one), resized to B * T.
inline void fill_synthetic_batch(std::vector<int>& inputs, std::vector<int>& targets, int step, int micro,
                                 int first_seq, int B, int T, int V) {
    inputs.resize((size_t)B * T), targets.resize((size_t)B * T);
    for (int b = 0; b < B; b++)
        for (int j = 0; j < T; j++) {
            inputs[b * T + j] = synthetic_token(step, micro, first_seq + b, j, V);
            targets[b * T + j] = synthetic_token(step, micro, first_seq + b, j + 1, V);
        }
}
