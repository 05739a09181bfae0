// The memory predictor: per-rank bytes by kind, from closed-form formulas, for
// any model shape, stage, world size, precision, micro-batch and recompute
// mode, without allocating anything. It extends the ZeRO paper's model-state
// formulas to the whole footprint. The trainer's accounting allocator measures
// the same quantities; tests hold the two to each other.
//
// Notation: Psi = parameters after padding (the plan's full buffer), N = world
// size, s = bytes per compute-dtype element, K = 12 (fp32 master, m, v).
// Model states per rank (the paper's Figure 1, s = 2):
//     stage 0  (2 + 2 + K) Psi          stage 2  2 Psi + (2 + K) Psi / N
//     stage 1  4 Psi + K Psi / N        stage 3  (4 + K) Psi / N
// Ours adds what a real run holds beside them: stage 3's gathered units (the
// embeddings unit and two layer units), stages 2-3's in-flight gradient units
// with their reduce-scatter landing slice.
#pragma once

#include <algorithm>
#include <cstdio>

#include "zero/memory.h"
#include "zero/param_layout.h"
#include "zero/shard_plan.h"

constexpr double ZERO_K = 12.0;

// The paper's model-state bytes per rank (mixed precision, s = 2).
inline double paper_model_state_bytes(double psi, int stage, int N) {
    switch (stage) {
        case 0: return (2 + 2 + ZERO_K) * psi;
        case 1: return 4 * psi + ZERO_K * psi / N;
        case 2: return 2 * psi + (2 + ZERO_K) * psi / N;
        default: return (2 + 2 + ZERO_K) * psi / N;
    }
}

struct MemoryQuery {
    GPT2Config cfg;
    int stage = 1;
    int world = 1;
    size_t dtype_bytes = 4;
    int micro_batch = 4;  // B per rank
    int seq_len = 64;     // T
    int recompute = 0;
    int micro_steps = 1;  // gradient accumulation
    size_t kernel_workspace_bytes = 0;  // the build's own kernel scratch (CUDA: cuBLASLt etc.)
};

struct MemoryPrediction {
    MemCounts reserved;       // allocated at start-up
    MemCounts after_forward;  // live, at the end of the last micro-step's forward
    MemCounts after_backward; // live, at the end of the last micro-step's backward
    MemCounts after_step;     // live, after the optimizer step
    size_t psi = 0, psi_padded = 0;
};

inline MemoryPrediction predict_memory(const MemoryQuery& q, size_t shard_align) {
    ParamLayout layout(q.cfg);
    ShardPlan plan(layout.unit_specs(), q.world, shard_align);
    const double N = q.world, s = (double)q.dtype_bytes;
    const double psi = (double)plan.full_numel;  // padded
    size_t P0 = plan.padded[0], Pmax = 0;
    for (int u = 1; u < plan.num_units(); u++) Pmax = std::max(Pmax, plan.padded[u]);

    MemoryPrediction p;
    p.psi = layout.num_parameters();
    p.psi_padded = plan.full_numel;
    const Arena D = Arena::Device;

    // --- model states
    double params_resident = q.stage < 3 ? psi * s : psi / N * s;
    double param_slots = q.stage < 3 ? 0 : (P0 + 2.0 * Pmax) * s;
    double grads_full = q.stage < 2 ? psi * s : 0;
    double grad_slots = q.stage < 2 ? 0 : (P0 + 2.0 * Pmax) * s;
    double grad_shard = q.stage < 2 ? 0 : psi / N * s;
    double optimizer = q.stage == 0 ? ZERO_K * psi : ZERO_K * psi / N;
    double comm = q.stage < 2 ? 0 : (double)plan.largest_slice() * s;

    // --- activations: what forward saves (see zero/activations.h for the list)
    double BT = (double)q.micro_batch * q.seq_len, C = q.cfg.channels, L = q.cfg.num_layers;
    double NH = q.cfg.num_heads, Vp = q.cfg.padded_vocab_size;
    double cm = q.recompute >= 2 ? 1 : L, cg = q.recompute >= 1 ? 1 : L;
    double per_layer = BT * C * (1 + 3 + 1 + 1 + 1 + 4) * s  // ln1, qkv, atty, residual2, ln2, fch
                       + (2 * BT + NH * BT + 2 * BT) * 4;    // ln1 stats, attention lse, ln2 stats
    double acts = cm * per_layer + cg * BT * 4 * C * s       // fch_gelu
                  + (1 + L + 1) * BT * C * s                 // encoded, residual3 per layer, lnf
                  + 2 * BT * 4 + BT * Vp * s                 // lnf stats, logits
                  + BT * 4 + 2 * BT * 4;                     // losses, input and target tokens
    double scratch = BT * C * (1 + 1 + 1 + 3 + 4) * s        // branch, dresidual, dbtc, dqkv, dfch
                     + plan.pieces_of_rank(0).size() * 4.0   // norm partial sums
                     + (double)q.kernel_workspace_bytes;

    auto set = [&](MemCounts& m, MemKind k, double bytes) { m.at(D, k) = (size_t)bytes; };
    set(p.reserved, MemKind::Params, params_resident + param_slots);
    set(p.reserved, MemKind::Grads, grads_full + grad_slots + grad_shard);
    set(p.reserved, MemKind::Optimizer, optimizer);
    set(p.reserved, MemKind::Activations, acts);
    set(p.reserved, MemKind::Scratch, scratch);
    set(p.reserved, MemKind::Comm, comm);

    // --- live at the three reporting points (of the last micro-step)
    bool accumulating = q.micro_steps > 1;  // gradients of earlier micro-steps are held
    double grads_held = q.stage < 2 ? grads_full : grad_shard;
    // stage 3 holds the embeddings unit for the LM head's backward, and has
    // prefetched the first unit backward visits (the final layernorm) into a
    // layer slot
    double params_after_forward = params_resident + (q.stage == 3 ? (double)(P0 + Pmax) * s : 0);
    for (MemCounts* m : {&p.after_forward, &p.after_backward, &p.after_step}) {
        set(*m, MemKind::Params, params_resident);
        set(*m, MemKind::Optimizer, optimizer);
    }
    set(p.after_forward, MemKind::Params, params_after_forward);
    set(p.after_forward, MemKind::Activations, acts);
    set(p.after_forward, MemKind::Grads, accumulating ? grads_held : 0);
    set(p.after_backward, MemKind::Grads, grads_held);
    return p;
}

inline void print_memory_prediction(const MemoryQuery& q, const MemoryPrediction& p, FILE* out) {
    const double MiB = 1048576.0;
    fprintf(out, "predicted memory per rank: stage %d, %d rank(s), %zu-byte compute dtype, B=%d T=%d, recompute %d\n",
            q.stage, q.world, q.dtype_bytes, q.micro_batch, q.seq_len, q.recompute);
    fprintf(out, "  parameters %zu (%zu with padding)\n", p.psi, p.psi_padded);
    fprintf(out, "  %-12s %12s %14s %14s %14s\n", "kind", "reserved", "after fwd", "after bwd", "after step");
    for (int k = 0; k < NUM_MEM_KINDS; k++) {
        MemKind kind = (MemKind)k;
        fprintf(out, "  %-12s %10.2f MiB %10.2f MiB %10.2f MiB %10.2f MiB\n", mem_kind_name(kind),
                p.reserved.get(Arena::Device, kind) / MiB, p.after_forward.get(Arena::Device, kind) / MiB,
                p.after_backward.get(Arena::Device, kind) / MiB, p.after_step.get(Arena::Device, kind) / MiB);
    }
    fprintf(out, "  %-12s %10.2f MiB %10.2f MiB %10.2f MiB %10.2f MiB\n", "total",
            p.reserved.total(Arena::Device) / MiB, p.after_forward.total(Arena::Device) / MiB,
            p.after_backward.total(Arena::Device) / MiB, p.after_step.total(Arena::Device) / MiB);
}
