// CPU twin of the fused AdamW update over one contiguous piece of a rank's shard.
// fp32 master weights and moments; the gradient arrives in its own dtype and is
// unscaled/clipped by one multiplier; the compute-dtype copy of the parameter is
// written in the same pass (stochastic rounding for bf16).
#pragma once

#include <cmath>
#include <cstddef>

#include "zero/base/dtype.h"
#include "zero/base/rng.h"

struct AdamWStep {
    float lr;
    float beta1, beta2, eps;
    float weight_decay;     // this piece's decay (0 for biases and gains)
    float grad_scale;       // 1 / loss_scale * clip coefficient
    float bias_correction1; // 1 - beta1^t
    float bias_correction2; // 1 - beta2^t
    uint64_t rounding_seed; // stochastic rounding stream of this step
};

// Writes the compute-dtype copy of one parameter. The random bits for bf16
// depend on the element's position in the full flat buffer, never on which rank
// owns it, so every sharding rounds identically.
template <typename Tp> HD Tp round_param(float p, uint64_t seed, size_t full_index);
template <> HD float round_param<float>(float p, uint64_t, size_t) { return p; }
template <> HD f16 round_param<f16>(float p, uint64_t, size_t) { return from_float<f16>(p); }
template <> HD bf16 round_param<bf16>(float p, uint64_t seed, size_t full_index) {
    return bf16_from_float_stochastic(p, rounding_bits(seed, full_index));
}

HD float adamw_update(float& master, float& m, float& v, float g, const AdamWStep& s) {
    m = s.beta1 * m + (1.0f - s.beta1) * g;
    v = s.beta2 * v + (1.0f - s.beta2) * g * g;
    float mhat = m / s.bias_correction1;
    float vhat = v / s.bias_correction2;
    master -= s.lr * (mhat / (sqrtf(vhat) + s.eps) + s.weight_decay * master);
    return master;
}

// One piece of a rank's optimizer step when the norm and AdamW take one
// launch each over a table of pieces (ZERO_VARIANTS=fused_optimizer,
// zero/base/variants.h): where the piece's gradient and compute-dtype copy
// are, where its master, m and v start, its rounding key and weight decay, and
// its first block in the table's launch (blocks before it: the pieces before
// it). The per-element code is the per-piece path's, so the bits are too.
template <typename T>
struct OptPiece {
    const T* grad;         // (n)
    T* param;              // (n), or null
    size_t states;         // master, m and v of its element i at states + i
    size_t n;              // 0: nothing to do (a piece another rank counts in the norm)
    size_t key;            // the rounding key of its element 0 (its place in the whole model's buffer)
    int decay;             // 1: the step's weight decay applies
    int vec;               // every pointer aligned for the packed accesses (CUDA)
    unsigned first_block;  // CUDA: its first block of the launch
};

// param may be null (stage 3 writes its copy elsewhere, or none is wanted).
template <typename Tg, typename Tp>
void adamw_cpu(float* master, float* m, float* v, const Tg* grad, Tp* param, size_t n, const AdamWStep& s,
               size_t full_offset) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float p = adamw_update(master[i], m[i], v[i], to_float(grad[i]) * s.grad_scale, s);
        if (param) param[i] = round_param<Tp>(p, s.rounding_seed, full_offset + i);
    }
}

// Every piece of a table (OptPiece) as adamw_cpu does it alone; s.weight_decay
// where a piece's `decay` is set, 0 elsewhere.
template <typename T>
void adamw_pieces_cpu(const OptPiece<T>* pieces, int np, float* master, float* m, float* v, AdamWStep s) {
    const float decay = s.weight_decay;
    for (int i = 0; i < np; i++) {
        const OptPiece<T>& p = pieces[i];
        s.weight_decay = p.decay ? decay : 0.0f;
        adamw_cpu(master + p.states, m + p.states, v + p.states, p.grad, p.param, p.n, s, p.key);
    }
}
