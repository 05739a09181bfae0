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
// with their reduce-scatter landing slice, and with optimizer offload at
// stages 2-3 under gradient accumulation two host landing slices; or, with
// offload_grad_accum_device, a device gradient shard, s Psi / N, and no host
// gradient buffer (two host landing slices it goes down through). The CPU
// AdamW's new parameters go up through two host landing slices, except with
// parameter offload (the host slices are the parameters) and with the delayed
// parameter update, which keeps a host copy, s Psi / N, and a second host
// gradient buffer, s Psi / N: the one the pending AdamW reads, live from its
// step's end to the next step's. With NVMe offload the last units' K-byte
// states are on disk instead (their file, K Psi_disk / N, counted in the disk
// arena), the rest on the host, and the host holds the disk's ring of tiles.
//
// With pipeline parallelism the prediction is one stage's (pp_stage): Psi is
// its units' (the last stage's include its copy of the tied embeddings), the
// activations are its layers' and ends', times the micro-batches it holds at
// once (1F1B: min(P - s, m); GPipe: m), and the tied embeddings' gradient is
// held as zero/engine/zero_engine.h says.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "kernels/cpu/adamw.h"
#include "zero/base/memory.h"
#include "zero/base/variants.h"
#include "zero/engine/disk_states.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"

constexpr double ZERO_K = 12.0;

// Model states alone from a raw parameter count, for any model (the paper's
// Table 1 and Figure 1): parameters and gradients in a `dtype_bytes` compute
// copy (2 in the paper's mixed precision), K bytes of optimizer state per
// parameter (12: fp32 master, m, v), each stage partitioning its share over N.
// No activations, buffers, padding or fragmentation.
struct ModelStateBytes {
    double params = 0, grads = 0, optimizer = 0;
    double total() const { return params + grads + optimizer; }
};

inline ModelStateBytes model_state_bytes(double psi, int stage, int N, double dtype_bytes = 2, double K = ZERO_K) {
    return {stage >= 3 ? dtype_bytes * psi / N : dtype_bytes * psi,  // params
            stage >= 2 ? dtype_bytes * psi / N : dtype_bytes * psi,  // grads
            stage >= 1 ? K * psi / N : K * psi};                     // optimizer
}

struct MemoryQuery {
    GPT2Config cfg;
    int stage = 1;
    int world = 1;        // the ranks ZeRO shards across (with tensor parallelism: the data-parallel ranks)
    int tp = 1;           // tensor-parallel degree: model states and split activations are t-local
    bool sp = false;      // sequence parallelism: the residual stream's rows are cut by tp too
    size_t dtype_bytes = 4;
    int micro_batch = 4;  // B per rank
    int seq_len = 64;     // T
    int recompute = 0;
    int micro_steps = 1;  // gradient accumulation
    bool offload_optimizer = false;
    bool offload_param = false;
    bool offload_nvme = false;     // --offload_optimizer nvme: the states' share nvme_fraction on disk
    double nvme_fraction = 1;
    int nvme_buffers = 4;          // the disk's ring: tiles in flight
    size_t nvme_tile_numel = 4u << 20;
    bool offload_grad_accum_device = false;  // offload, stages 2-3: accumulate micro-steps on the device
    bool offload_delay = false;  // the delayed parameter update, in its steady state (steps after W + 1)
    bool offload_activations = false;
    // ZeRO-R's Pa, which the trainer uses when tp > 1 with -r 2 and no sp; false (--partition_activations 0):
    // the saved layer outputs kept whole, as in the ZeRO paper's configurations without Pa
    bool partition_activations = true;
    size_t kernel_workspace_bytes = 0;  // the build's own kernel scratch (CUDA: cuBLASLt etc.)
    StageRange pp_stage;         // the pipeline stage predicted for (the whole model without a pipeline)
    std::vector<int> pp_layers;  // every stage's layers (empty: no pipeline)
    bool gpipe = false;          // the schedule: GPipe (all forwards, then all backwards), else 1F1B

    int pp() const { return std::max(1, (int)pp_layers.size()); }
    // the same run, predicted for stage s
    MemoryQuery at_stage(int s) const {
        MemoryQuery q = *this;
        if (pp() > 1) q.pp_stage = PipelinePlan{pp_layers}.range(s);
        return q;
    }

    // micro-batches whose activations the stage holds at once (1F1B: min(P - s, m); GPipe: m)
    int in_flight() const {
        return gpipe && pp_stage.stages > 1 ? micro_steps : std::min(pp_stage.stages - pp_stage.stage, micro_steps);
    }
    // backwards the stage runs before its last forward: gradients of the step are held then
    int early_backwards() const { return micro_steps - in_flight(); }
};

struct MemoryPrediction {
    MemCounts reserved;       // allocated at start-up
    MemCounts after_forward;  // live, at the end of the last micro-step's forward
    MemCounts after_backward; // live, at the end of the last micro-step's backward
    MemCounts after_step;     // live, after the optimizer step
    size_t psi = 0, psi_padded = 0;
};

inline MemoryPrediction predict_memory(const MemoryQuery& q, size_t shard_align) {
    ParamLayout layout(q.cfg, q.tp, q.pp_stage);  // a stage's t-local units, sharded across the data-parallel ranks
    ShardPlan plan(layout.unit_specs(), q.world, shard_align);
    const double N = q.world, s = (double)q.dtype_bytes;
    const double psi = (double)plan.full_numel;  // padded
    const double slice = (double)plan.largest_slice();
    size_t P0 = plan.padded[0], Pmax = 0;
    for (int u = 1; u < plan.num_units(); u++) Pmax = std::max(Pmax, plan.padded[u]);
    const bool off_opt = q.offload_optimizer, off_par = q.offload_param;
    // offload at stages 2-3: the gradient slices add up on the host (through two
    // host landing slices, with several micro-steps) or in a device gradient
    // shard, which goes down during the step through two host landing slices
    // (with a delayed update: into the host gradient buffer, at the last micro-step)
    const bool host_accum = off_opt && q.stage >= 2 && q.micro_steps > 1 && !q.offload_grad_accum_device;
    const bool device_accum = off_opt && q.stage >= 2 && q.offload_grad_accum_device;
    const bool grads_down_in_step = device_accum && !q.offload_delay;

    MemoryPrediction p{.psi = layout.num_parameters(), .psi_padded = plan.full_numel};
    const Arena D = Arena::Device, H = Arena::Host;

    // --- model states, device
    double unit_slots = (P0 + 2.0 * Pmax) * s;  // the embeddings unit and two others
    double params_resident = q.stage < 3 ? psi * s : off_par ? 0 : psi / N * s;
    double param_extra = q.stage < 3 ? 0 : unit_slots + (off_par ? 3 * slice * s : 0);  // gathered units, uploads
    double grads_full = q.stage < 2 ? psi * s : 0;
    // the LM head's wte gradient apart over the micro-steps, on a rank holding both ends (zero_engine.h)
    const bool both_ends = q.pp_stage.first && q.pp_stage.last;
    double head_grads = both_ends && q.micro_steps > 1 ? (double)layout.numel(WTE) * s : 0;
    double grad_shard = q.stage < 2 || (off_opt && !device_accum) ? 0 : psi / N * s;
    double grad_slots = q.stage < 2 ? 0 : unit_slots;
    double optimizer = off_opt ? 0 : q.stage == 0 ? ZERO_K * psi : ZERO_K * psi / N;
    double comm = q.stage < 2 ? 0 : slice * s;  // the reduce-scatter's landing slice
    // --- model states, host (offload)
    double host_optimizer = off_opt ? ZERO_K * psi / N : 0;
    double disk_optimizer = 0;  // NVMe offload: the states' file, the host keeping the rest and the ring
    if (off_opt && q.offload_nvme) {
        const ShardPlan::DiskSplit d = plan.disk_split(q.nvme_fraction, q.nvme_tile_numel);
        host_optimizer = ZERO_K * d.begin + DiskStates::ring_bytes(q.nvme_buffers, d.largest_tile());
        disk_optimizer = DiskStates::file_bytes(d.tiles);
    }
    double host_grads = off_opt && !grads_down_in_step ? psi / N * s : 0;
    // the delayed update: the last step's gradients, which its AdamW reads during this step
    double pending_grads = off_opt && q.offload_delay ? psi / N * s : 0;
    // the CPU AdamW's compute-dtype output: the parameter slices themselves
    // (offload_param), a copy the delayed update uploads after its AdamW, or
    // two landing slices it goes up through unit by unit
    const bool host_param_copy = off_par || q.offload_delay;
    double host_params = off_opt && host_param_copy ? psi / N * s : 0;
    double host_comm = (host_accum ? 2 * slice * s : 0) + (off_opt && !host_param_copy ? 2 * slice * s : 0) +
                       (grads_down_in_step ? 2 * slice * s : 0);

    // --- activations: what forward saves (see zero/layout/activations.h for the list).
    // With tensor parallelism (t > 1) the column-parallel outputs (qkv, attention,
    // fc), the heads' statistics and the logits are t-local; the residual stream
    // and the layernorms' inputs and outputs are whole on every rank, unless
    // sequence parallelism cuts the residual stream (R = BT/t rows: the
    // embeddings, residual2, the layer outputs, the layernorms' statistics).
    double BT = (double)q.micro_batch * q.seq_len, C = q.cfg.channels, L = layout.stage.num_layers;
    const double ends = q.pp_stage.last ? 1 : 0;  // the final layernorm, LM head and loss: the last stage's
    double t = q.tp, Cl = C / t, NHl = q.cfg.num_heads / t, Vl = q.cfg.padded_vocab_size / t;
    double R = q.sp ? BT / t : BT;
    double cm = q.recompute >= 2 ? 1 : L, cg = q.recompute >= 1 ? 1 : L;
    // ZeRO-R Pa (tensor parallelism, -r 2, no sp): a rank keeps BT/t rows of each
    // saved layer output, on the device or (offload) the host; two whole outputs cycle
    bool pa = q.tp > 1 && !q.sp && q.recompute == 2 && q.partition_activations;
    double kept = pa ? BT / t : R;                    // rows of a saved layer output kept
    bool cycling = q.offload_activations || pa;
    double outputs = cycling ? 2 : L;  // each layer's output, or a pair cycling on the device
    // every buffer of an activation block starts 256-byte aligned
    auto part = [](double bytes) { return std::ceil(bytes / 256) * 256; };
    double acts = part(R * C * s)                                          // encoded (the stage's input)
                  + part(cm * BT * C * s) + part(cm * 2 * R * 4)           // ln1, its statistics
                  + part(cm * BT * 3 * Cl * s) + part(cm * BT * Cl * s)    // qkv, atty
                  + part(cm * NHl * BT * 4)                                // attention lse
                  + part(cm * R * C * s)                                   // residual2
                  + part(cm * BT * C * s) + part(cm * 2 * R * 4)           // ln2, its statistics
                  + part(cm * BT * 4 * Cl * s) + part(cg * BT * 4 * Cl * s)  // fch, fch_gelu
                  + part(outputs * R * C * s)                              // layer outputs
                  + part(ends * BT * C * s) + part(ends * 2 * R * 4)       // lnf, its statistics
                  + part(ends * BT * Vl * s)                               // logits
                  + part(ends * BT * 4)                                    // losses
                  + (q.pp_stage.first || q.pp_stage.last ? part(2 * BT * 4) : 0)  // tokens
                  + (q.tp > 1 ? part(ends * (t + 3) * BT * 4) : 0)         // the vocabulary-parallel loss's rows
                  + (pa && !q.offload_activations ? part(L * kept * C * s) : 0);  // Pa's kept rows
    double host_acts = q.offload_activations ? part(L * kept * C * s) : 0;
    acts *= q.in_flight(), host_acts *= q.in_flight();  // one copy per micro-batch in flight
    const double loss_sums = ends * BT * 4;  // the step's losses, summed over its micro-batches: one buffer
    double backward_scratch = 3 * part(BT * C * s)                            // branch, dresidual, dbtc
                              + part(BT * 3 * Cl * s) + part(BT * 4 * Cl * s)  // dqkv, dfch
                              + (q.sp ? part(2 * C * s) : 0);  // a layernorm's gradients from a rank's rows
    double scratch = backward_scratch +
                     (off_opt && !grads_down_in_step ? 0 : plan.pieces_of_rank(0).size() * 4.0)  // norm partial sums
                     + (double)q.kernel_workspace_bytes;
    if (!off_opt && variant_on(Variant::FusedOptimizer))  // the norm's and AdamW's tables of pieces (zero_engine.h)
        scratch += (double)sizeof(OptPiece<float>) * (plan.pieces_of_rank(0).size() +
                                                      (q.stage == 0 ? plan.pieces_full() : plan.pieces_of_rank(0)).size());

    auto set = [&](MemCounts& m, Arena a, MemKind k, double bytes) { m.at(a, k) = (size_t)bytes; };
    set(p.reserved, D, MemKind::Params, params_resident + param_extra);
    set(p.reserved, D, MemKind::Grads, grads_full + grad_slots + grad_shard + head_grads);
    set(p.reserved, D, MemKind::Optimizer, optimizer);
    set(p.reserved, D, MemKind::Activations, acts + loss_sums);
    set(p.reserved, D, MemKind::Scratch, scratch);
    set(p.reserved, D, MemKind::Comm, comm);
    set(p.reserved, H, MemKind::Params, host_params);
    set(p.reserved, H, MemKind::Grads, host_grads + pending_grads);
    set(p.reserved, H, MemKind::Optimizer, host_optimizer);
    set(p.reserved, Arena::Disk, MemKind::Optimizer, disk_optimizer);
    set(p.reserved, H, MemKind::Activations, host_acts);
    set(p.reserved, H, MemKind::Comm, host_comm);

    // --- live at the three reporting points (of the last micro-step; a pipeline
    // stage's: after its last forward, after its last backward)
    bool accumulating = q.early_backwards() > 0;  // gradients of earlier micro-steps are held
    double grads_held = q.stage < 2 ? grads_full : grad_shard;
    // the last of several stages keeps the LM head's gradient in its unit-0
    // slot over the step (stages 2-3), until the step sends it to the first
    double head_slot = q.pp_stage.last && !q.pp_stage.first && q.stage >= 2 ? (double)P0 * s : 0;
    // stage 3 holds the embeddings unit for the LM head's backward, and has
    // prefetched the first unit backward visits (the final layernorm) into a
    // layer slot; a pipeline stage's forward ends with nothing held
    double held_units = q.stage == 3 && q.pp_stage.stages == 1 ? (double)(P0 + Pmax) * s : 0;
    for (MemCounts* m : {&p.after_forward, &p.after_backward, &p.after_step}) {
        set(*m, D, MemKind::Params, params_resident);
        set(*m, D, MemKind::Optimizer, optimizer);
        set(*m, H, MemKind::Params, host_params);
        set(*m, H, MemKind::Optimizer, host_optimizer);
        set(*m, Arena::Disk, MemKind::Optimizer, disk_optimizer);
    }
    set(p.after_forward, D, MemKind::Params, params_resident + held_units);
    set(p.after_forward, D, MemKind::Activations, acts + loss_sums);
    set(p.after_backward, D, MemKind::Activations, loss_sums);
    // a pipeline stage after the first holds its input's gradient (in the
    // backward scratch) until the next exchange sends it back
    if (q.pp_stage.stages > 1 && !q.pp_stage.first) set(p.after_backward, D, MemKind::Scratch, backward_scratch);
    set(p.after_forward, H, MemKind::Activations, host_acts);
    set(p.after_forward, D, MemKind::Grads, accumulating ? grads_held + head_grads + head_slot : 0);
    // host gradient slices fill up micro-step by micro-step at stages 2-3 (unless
    // they accumulate on the device); stage 1 reduces (and copies down) only at the last
    set(p.after_forward, H, MemKind::Grads,
        (accumulating && q.stage >= 2 && !device_accum ? host_grads : 0) + pending_grads);
    // stage 1 with offload keeps the full gradients on the device and a copy of its slices on the host
    set(p.after_backward, D, MemKind::Grads, grads_held + head_slot);
    set(p.after_backward, H, MemKind::Grads, host_grads + pending_grads);
    set(p.after_step, H, MemKind::Grads, pending_grads);  // this step's, read by its queued AdamW
    return p;
}

inline void print_memory_prediction(const MemoryQuery& q, const MemoryPrediction& p, FILE* out) {
    const double MiB = 1048576.0;
    fprintf(out, "predicted memory per rank: stage %d, %d rank(s), %zu-byte compute dtype, B=%d T=%d, recompute %d%s%s%s%s%s\n",
            q.stage, q.world, q.dtype_bytes, q.micro_batch, q.seq_len, q.recompute,
            q.offload_optimizer ? (q.offload_nvme ? ", optimizer offload to nvme" : ", optimizer offload") : "",
            q.offload_optimizer && q.stage >= 2 && q.offload_grad_accum_device
                ? " (gradients accumulated on the device)" : "",
            q.offload_delay ? ", delayed parameter update" : "",
            q.offload_param ? ", parameter offload" : "",
            q.offload_activations ? ", activation offload" : "");
    if (q.tp > 1)
        fprintf(out, "  tensor parallel: t = %d%s; the rank(s) above are a tensor rank's data group\n", q.tp,
                q.sp ? ", sequence parallel" : "");
    if (q.pp_stage.stages > 1)
        fprintf(out, "  pipeline stage %d of %d: layers %d..%d%s%s, %d micro-batch(es) of %d in flight (%s)\n",
                q.pp_stage.stage, q.pp_stage.stages, q.pp_stage.first_layer,
                q.pp_stage.first_layer + q.pp_stage.num_layers - 1, q.pp_stage.first ? ", the embeddings" : "",
                q.pp_stage.last ? ", the final layernorm and the LM head (a copy of wte)" : "", q.in_flight(),
                q.micro_steps, q.gpipe ? "gpipe" : "1f1b");
    fprintf(out, "  parameters %zu (%zu with padding%s)\n", p.psi, p.psi_padded,
            q.tp > 1 ? " in a tensor rank's part" : "");
    for (int a = 0; a < NUM_ARENAS; a++) {
        Arena arena = (Arena)a;
        if (p.reserved.total(arena) == 0) continue;
        fprintf(out, "  %-6s %-12s %12s %14s %14s %14s\n", arena_name(arena), "kind", "reserved", "after fwd",
                "after bwd", "after step");
        for (int k = 0; k < NUM_MEM_KINDS; k++) {
            MemKind kind = (MemKind)k;
            if (p.reserved.get(arena, kind) == 0) continue;
            fprintf(out, "  %-6s %-12s %10.2f MiB %10.2f MiB %10.2f MiB %10.2f MiB\n", "", mem_kind_name(kind),
                    p.reserved.get(arena, kind) / MiB, p.after_forward.get(arena, kind) / MiB,
                    p.after_backward.get(arena, kind) / MiB, p.after_step.get(arena, kind) / MiB);
        }
        fprintf(out, "  %-6s %-12s %10.2f MiB %10.2f MiB %10.2f MiB %10.2f MiB\n", "", "total",
                p.reserved.total(arena) / MiB, p.after_forward.total(arena) / MiB, p.after_backward.total(arena) / MiB,
                p.after_step.total(arena) / MiB);
    }
}
