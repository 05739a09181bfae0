// The ZeRO paper's memory tables (arXiv 1910.02054), computed from the
// predictor's formulas:
//   Table 1: per-device GB of model states for Psi = 7.5B, 128B, 1T at
//            N_d = 1..1024, mixed precision (2 + 2 + K bytes per parameter, K = 12);
//   Table 2: the largest Psi whose model states fit a device, per stage and N_d,
//            and ours: the largest GPT-2-shaped model whose *whole* predicted
//            footprint (activations, buffers, stage 3's gathered units) fits.
// GB = 1e9 bytes, as the paper counts.
#pragma once

#include <string>
#include <vector>

#include "zero/engine/memory_predictor.h"
#include "zero/layout/gpt2_config.h"
#include "zero/layout/shard_plan.h"

constexpr double PAPER_GB = 1e9;

// ---- Table 1

struct Table1Row {
    double psi = 0;
    int nd = 1;
    double gb[4] = {0, 0, 0, 0};  // stage 0 (baseline), 1 (Pos), 2 (Pos+g), 3 (Pos+g+p)
};

inline std::vector<int> paper_nds() { return {1, 4, 16, 64, 256, 1024}; }

inline std::vector<Table1Row> table1_rows() {
    std::vector<Table1Row> rows;
    for (double psi : {7.5e9, 128e9, 1e12})
        for (int nd : paper_nds()) {
            rows.push_back({psi, nd});
            for (int z = 0; z < 4; z++) rows.back().gb[z] = model_state_bytes(psi, z, nd).total() / PAPER_GB;
        }
    return rows;
}

// ---- Table 2

// The largest Psi whose mixed-precision model states fit `device_bytes` (the paper's analysis).
inline double paper_max_params(double device_bytes, int stage, int nd) {
    return device_bytes / model_state_bytes(1.0, stage, nd).total();
}

// The GPT-2-shaped family we grow: width, heads, vocabulary and batch fixed,
// layers searched. bf16 with whole-block recomputation (-r 2), the setting in
// which activations are smallest without offload.
struct Gpt2Family {
    int channels = 4096, heads = 32, vocab = 50257;
    int micro_batch = 1, seq_len = 1024, recompute = 2;
    size_t dtype_bytes = 2;
    std::string describe() const {
        return "GPT-2 blocks of width C=" + std::to_string(channels) + " (" + std::to_string(heads) +
               " heads), V=" + std::to_string(vocab) + ", B=" + std::to_string(micro_batch) +
               ", T=" + std::to_string(seq_len) + ", bf16, -r " + std::to_string(recompute);
    }
};

struct LargestModel {
    int layers = 0;      // 0: not even one layer fits
    double params = 0;   // its parameter count
    double bytes = 0;    // its predicted per-device footprint (reserved, device)
};

inline MemoryPrediction predict_family(const Gpt2Family& f, int layers, int stage, int nd) {
    const GPT2Config cfg{.max_seq_len = f.seq_len, .vocab_size = f.vocab, .padded_vocab_size = padded_vocab(f.vocab),
                         .num_layers = layers, .num_heads = f.heads, .channels = f.channels};
    return predict_memory({.cfg = cfg, .stage = stage, .world = nd, .dtype_bytes = f.dtype_bytes,
                           .micro_batch = f.micro_batch, .seq_len = f.seq_len, .recompute = f.recompute},
                          SHARD_ALIGN);
}

// The most layers whose predicted device footprint (everything allocated at
// start-up) fits device_bytes: a binary search, the footprint growing with L.
inline LargestModel largest_gpt2(const Gpt2Family& f, double device_bytes, int stage, int nd) {
    auto fits = [&](int L) {
        return (double)predict_family(f, L, stage, nd).reserved.total(Arena::Device) <= device_bytes;
    };
    if (!fits(1)) return {};
    // an upper bound: the paper's Psi (no activations) over a layer's 12 C^2 parameters
    double per_layer = 12.0 * f.channels * f.channels;
    int lo = 1, hi = (int)std::min(4.0e6, paper_max_params(device_bytes, stage, nd) / per_layer + 2);
    while (fits(hi)) hi *= 2;
    while (hi - lo > 1) {  // fits(lo), !fits(hi)
        int mid = lo + (hi - lo) / 2;
        (fits(mid) ? lo : hi) = mid;
    }
    const MemoryPrediction p = predict_family(f, lo, stage, nd);
    return {lo, (double)p.psi, (double)p.reserved.total(Arena::Device)};
}
