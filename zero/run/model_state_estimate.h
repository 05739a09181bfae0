// --estimate 1 --params PSI: the ZeRO paper's per-device model-state memory for
// a model of PSI parameters (any architecture, not only GPT-2's shapes), at
// every stage, over --ranks data-parallel ranks. Model states only: no
// activations, buffers or padding, which the full prediction (--estimate 1
// without --params, GPT-2 shapes) adds.
#pragma once

#include <cmath>
#include <cstdio>

#include "zero/base/common.h"
#include "zero/engine/memory_predictor.h"
#include "zero/run/options.h"

// The compute copy's bytes: the paper's mixed precision (2) unless -p says otherwise.
inline double estimate_dtype_bytes(const TrainOptions& o) {
    if (o.precision.empty() || o.precision == "bf16" || o.precision == "fp16") return 2;
    CHECK(o.precision == "fp32", "-p must be fp32, bf16 or fp16 (got '%s')", o.precision.c_str());
    return 4;
}

inline void print_model_state_estimate(const TrainOptions& o, FILE* out) {
    CHECK(std::isfinite(o.params) && o.params >= 1, "--params must be a parameter count of at least 1 (got %g)",
          o.params);
    CHECK(o.ranks >= 1, "--ranks must be at least 1 (got %d)", o.ranks);
    CHECK(o.zero_stage >= 0 && o.zero_stage <= 3, "-z (ZeRO stage) must be 0, 1, 2 or 3 (got %d)", o.zero_stage);
    const double s = estimate_dtype_bytes(o), GB = 1e9;
    fprintf(out, "model states only (parameters, gradients, optimizer state; no activations, buffers or padding)\n");
    fprintf(out, "  Psi = %.4g parameters, N_d = %d data-parallel rank(s), %g-byte parameters and gradients%s, K = %g\n",
            o.params, o.ranks, s, s == 2 ? " (mixed precision, as the paper)" : "", ZERO_K);
    fprintf(out, "  %-16s %14s %14s %14s %14s   (GB = 1e9 bytes, per rank)\n", "stage", "parameters", "gradients",
            "optimizer", "total");
    const char* names[4] = {"0 baseline", "1 Pos", "2 Pos+g", "3 Pos+g+p"};
    for (int z = 0; z <= 3; z++) {
        ModelStateBytes m = model_state_bytes(o.params, z, o.ranks, s);
        fprintf(out, "  %-16s %11.5g GB %11.5g GB %11.5g GB %11.5g GB%s\n", names[z], m.params / GB, m.grads / GB,
                m.optimizer / GB, m.total() / GB, z == o.zero_stage ? "   <- -z" : "");
    }
}
