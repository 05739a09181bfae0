// Activation buffers of one rank: what forward saves for backward, and the
// scratch backward works in. Each is a pointer into one of two allocations
// (saved activations, backward scratch), sized once for the micro-batch.
//
// Recompute modes (ZeRO-R's activation checkpointing):
//   0  every layer keeps all its activations;
//   1  the GELU output is not kept; backward recomputes it from its input;
//   2  a layer keeps only its output (the residual stream); backward recomputes
//      the whole layer from its input into one layer's worth of buffers.
// With recompute 2, offload_outputs keeps those layer outputs in host memory
// (ZeRO-R's checkpointed activations on the CPU): the device holds two, the
// layer being computed and its input, and each is copied down after forward
// and back up before its layer's recomputation.
//
// With tensor parallelism (tp > 1, zero/layout/tp_plan.h) a rank holds its
// heads' and hidden features' part of the split buffers (the "(..., 3C)"
// buffers below are then 3C/tp wide, and so on) and its vocabulary columns of
// the logits; with sp, BT/tp rows of the residual stream and the layernorms'
// statistics, while ln1, ln2 and lnf, which feed a column-parallel matmul, stay
// whole (a rank writes its rows at row tp_rank*BT/tp before the all-gather).
// With Pa (`partitioned`) a rank keeps only its BT/tp rows of each saved layer
// output, and the device's two whole outputs cycle as with offload (zero/README.md,
// "Two slicings").
//
// A pipeline stage (StageRange) holds its own layers' buffers; `encoded` is
// its input (the embeddings on the first stage, the previous stage's output
// elsewhere), and the final layernorm, logits and losses are the last
// stage's only. It runs the forwards of several micro-batches before their
// backwards, so the saved buffers come in `slots` copies, one per micro-batch
// in flight; select_slot(k) points them at copy k. The backward scratch is
// one, and so is loss_sums, the sum over a step's micro-batches, in a
// buffer of its own: live from the step's first loss to its read-back.
#pragma once

#include <functional>
#include <vector>

#include "zero/layout/gpt2_config.h"
#include "zero/layout/pipeline_plan.h"
#include "zero/base/backend.h"
#include "zero/base/memory.h"

template <typename T>
struct LayerActs {
    T* ln1;                      // (B, T, C)
    float* ln1_mean;             // (B, T)
    float* ln1_rstd;             // (B, T)
    T* qkv;                      // (B, T, 3C)
    T* atty;                     // (B, T, C)  attention output, before the projection
    float* att_lse;              // (B, NH, T) log-sum-exp of each attention row
    T* residual2;                // (B, T, C)  residual + attention branch
    T* ln2;                      // (B, T, C)
    float* ln2_mean;             // (B, T)
    float* ln2_rstd;             // (B, T)
    T* fch;                      // (B, T, 4C) pre-GELU
    T* fch_gelu;                 // (B, T, 4C)
    T* residual3;                // (B, T, C)  the layer's output
};

template <typename T>
class Activations {
  public:
    // Sized for micro-batch B and sequence length T_ (the maxima: passes may use fewer).
    Activations(const GPT2Config& cfg_, int B, int T_, int recompute_, bool offload_outputs_, MemoryAccountant& mem_,
                int tp_ = 1, bool sp_ = false, int tp_rank_ = 0, StageRange stage_ = StageRange{}, int slots_ = 1,
                bool partition = true)
        : cfg(cfg_), maxBT((size_t)B * T_), recompute(recompute_), offload_outputs(offload_outputs_), tp(tp_),
          sp(sp_), partitioned(partition && tp_ > 1 && !sp_ && recompute_ == 2), tp_rank(tp_rank_), Cl(cfg_.channels / tp_),
          NHl(cfg_.num_heads / tp_), first(stage_.first), last(stage_.last),
          L(stage_.num_layers < 0 ? cfg_.num_layers : stage_.num_layers), slots(slots_), mem(mem_) {
        CHECK(!sp || maxBT % tp == 0, "internal: sequence parallelism needs B*T divisible by the tensor group");
        CHECK(!partitioned || maxBT % tp == 0, "internal: partitioned checkpoints need B*T divisible by the group");
        CHECK(!offload_outputs || recompute == 2, "activation offload needs -r 2 (only layer outputs are kept)");
        size_t BT = maxBT, C = cfg.channels, Vp = cfg.padded_vocab_size;
        size_t Cl_ = Cl, NH = NHl, Vl = Vp / tp;  // t-local widths
        size_t R = rows(BT);                        // rows of the residual stream held here
        size_t cm = copies_main(), cg = copies_gelu(), co = cycling() ? 2 : L;
        size_t kept = saved_rows(BT);  // rows of each saved layer output kept
        size_t ends = last ? 1 : 0;  // the final layernorm, the LM head and the loss: the last stage's
        // saved activations, in one allocation per slot
        saved_parts = {
            part(encoded, R * C),           part(ln1, cm * BT * C),
            part(ln1_stats, cm * 2 * R),    part(qkv, cm * BT * 3 * Cl_),
            part(atty, cm * BT * Cl_),      part(att_lse, cm * NH * BT),
            part(residual2, cm * R * C),    part(ln2, cm * BT * C),
            part(ln2_stats, cm * 2 * R),    part(fch, cm * BT * 4 * Cl_),
            part(fch_gelu, cg * BT * 4 * Cl_), part(residual3, co * R * C),
            part(lnf, ends * BT * C),       part(lnf_stats, ends * 2 * R),
            part(logits, ends * BT * Vl),   part(losses, ends * BT),
            part(tokens, first || last ? 2 * BT : 0),
            part(vocab_stats, tp > 1 ? ends * (tp + 3) * BT : 0),
            part(residual3_parts, partitioned && !offload_outputs ? L * kept * C : 0),
        };
        host_parts = {part(residual3_host, offload_outputs ? L * kept * C : 0)};
        for (int k = 0; k < slots; k++) {
            saved_blocks.push_back(carve(saved_parts, MemKind::Activations, Arena::Device, "activations"));
            if (offload_outputs)
                host_blocks.push_back(carve(host_parts, MemKind::Activations, Arena::Host, "layer_outputs_host"));
        }
        select_slot(0);
        if (last) loss_sums = mem.allocate_array<float>(maxBT, MemKind::Activations, Arena::Device, "loss_sums", false);
        // scratch: a branch output in forward; the residual stream's and one layer's gradients in backward
        std::vector<Part> scratch = {
            part(branch, BT * C),
            part(dresidual, BT * C), part(dbtc, BT * C),
            part(dqkv, BT * 3 * Cl_),  part(dfch, BT * 4 * Cl_),
            part(ln_grads, sp ? 2 * C : 0),
        };
        scratch_block = carve(scratch, MemKind::Scratch, Arena::Device, "backward_scratch");
        for (Part& p : scratch) p.bind(scratch_block);
    }

    const GPT2Config cfg;
    const size_t maxBT;
    const int recompute;
    const bool offload_outputs;
    const int tp;        // tensor-parallel degree
    const bool sp;       // sequence parallelism: the residual stream's rows are cut across the group too
    const bool partitioned;  // Pa: each saved layer output kept as this rank's BT/tp rows only
    const int tp_rank;
    const int Cl, NHl;   // this rank's channels of the split layers (C/tp) and heads (NH/tp)
    const bool first, last;  // the pipeline stage holds the embeddings / the final layernorm and LM head
    const int L;             // the layers of the stage
    const int slots;         // micro-batches whose activations it can hold at once
    // copies of each per-layer buffer: L (the stage's layers), or 1 where recomputed
    int copies_main() const { return recompute >= 2 ? 1 : L; }  // ln1 .. fch
    int copies_gelu() const { return recompute >= 1 ? 1 : L; }  // fch_gelu

    // saved by forward (per layer: L copies, or fewer with recomputation; see layer())
    T* encoded;          // (B, T, C)
    T* ln1;              // (B, T, C)
    float* ln1_stats;    // (2, B, T): mean then rstd
    T* qkv;              // (B, T, 3C)
    T* atty;             // (B, T, C)
    float* att_lse;      // (B, NH, T)
    T* residual2;        // (B, T, C)
    T* ln2;              // (B, T, C)
    float* ln2_stats;    // (2, B, T)
    T* fch;              // (B, T, 4C)
    T* fch_gelu;         // (B, T, 4C)
    T* residual3;        // (L, B, T, C): each layer's output; (2, B, T, C) with offload_outputs
    T* residual3_host = nullptr;  // (L, B, T, C) on the host with offload_outputs (Pa: (L, BT/tp, C))
    T* residual3_parts = nullptr; // Pa on the device: (L, BT/tp, C), each layer output's rows of this rank
    T* lnf;              // (B, T, C)
    float* lnf_stats;    // (2, B, T): mean then rstd
    T* logits;           // (B, T, Vp): logits, then dlogits in place
    float* losses;       // (B, T)
    float* loss_sums = nullptr;  // (B, T): the losses of a step's micro-steps, summed (the last stage's)
    int* tokens;         // (2, B, T): inputs then targets, on the device
    float* vocab_stats = nullptr;  // (tp + 3, B, T): the vocabulary-parallel loss's row statistics (tp > 1)
    // scratch: never needed from one pass to the next
    T* branch;           // (B, T, C) a projection's output before it joins the residual stream
    T* dresidual;        // (B, T, C)
    T* dbtc;             // (B, T, C)
    T* dqkv;             // (B, T, 3C)
    T* dfch;             // (B, T, 4C)
    T* ln_grads = nullptr;  // (2, C) sp: a layernorm's weight and bias gradients from this rank's rows

    // rows of the residual stream a rank holds in a pass over BT rows
    size_t rows(size_t BT) const { return sp ? BT / tp : BT; }
    // rows of a saved layer output it keeps for backward, and where they start
    size_t saved_rows(size_t BT) const { return partitioned ? BT / tp : rows(BT); }
    size_t saved_row0(size_t BT) const { return partitioned ? (size_t)tp_rank * saved_rows(BT) : 0; }
    // the layer outputs on the device cycle through two buffers (kept elsewhere between passes)
    bool cycling() const { return offload_outputs || partitioned; }

    int* inputs() const { return tokens; }
    int* targets() const { return tokens + maxBT; }

    // Layer l's buffers for a pass over BT rows (BT <= maxBT). Copies shared by
    // all layers (recompute) are the same pointers for every l.
    LayerActs<T> layer(int l, size_t BT) const {
        size_t C = cfg.channels, NH = NHl, Cs = Cl;  // Cs: width of the split buffers
        size_t m = copies_main() == 1 ? 0 : l, g = copies_gelu() == 1 ? 0 : l, R = rows(BT);
        float *ln1_mean = ln1_stats + m * 2 * R, *ln2_mean = ln2_stats + m * 2 * R;  // each followed by its rstd
        return {.ln1 = ln1 + m * BT * C, .ln1_mean = ln1_mean, .ln1_rstd = ln1_mean + R,
                .qkv = qkv + m * BT * 3 * Cs, .atty = atty + m * BT * Cs, .att_lse = att_lse + m * NH * BT,
                .residual2 = residual2 + m * R * C,
                .ln2 = ln2 + m * BT * C, .ln2_mean = ln2_mean, .ln2_rstd = ln2_mean + R,
                .fch = fch + m * BT * 4 * Cs, .fch_gelu = fch_gelu + g * BT * 4 * Cs,
                .residual3 = layer_output(l, BT)};
    }

    // the input of layer l: the embeddings, or the previous layer's output
    T* layer_input(int l, size_t BT) const { return l == 0 ? encoded : layer_output(l - 1, BT); }

    // Offload / Pa: after layer l's (training) forward, its output (this rank's rows
    // of it with Pa) goes to where it is kept ...
    void save_layer_output(int l, size_t BT, Stream s) const {
        size_t C = cfg.channels, at = saved_row0(BT) * C;
        if (cycling()) device_copy(kept_output(l, BT), layer_output(l, BT) + at, saved_rows(BT) * C * sizeof(T), s);
    }
    // ... and before layer l is recomputed in backward, its input comes back (with
    // Pa, this rank's rows only: the model all-gathers the rest).
    void load_layer_input(int l, size_t BT, Stream s) const {
        size_t C = cfg.channels, at = saved_row0(BT) * C;
        if (cycling() && l > 0)
            device_copy(layer_output(l - 1, BT) + at, kept_output(l - 1, BT), saved_rows(BT) * C * sizeof(T), s);
    }

    // Points the saved buffers at slot k's copy.
    void select_slot(int k) {
        CHECK(k >= 0 && k < slots, "internal: activation slot %d of %d", k, slots);
        slot = k;
        for (Part& p : saved_parts) p.bind(saved_blocks[k]);
        if (!host_blocks.empty())
            for (Part& p : host_parts) p.bind(host_blocks[k]);
    }

    // live from the start of forward until backward has consumed them (the selected slot's)
    void set_saved_live(bool live) {
        mem.set_live(saved_blocks[slot], live);
        if (!host_blocks.empty()) mem.set_live(host_blocks[slot], live);
    }
    void set_scratch_live(bool live) { mem.set_live(scratch_block, live); }

    MemoryAccountant& mem;

  private:
    // One buffer of a carved block: its size, where in the block it starts, and
    // how to point its member at it.
    struct Part {
        size_t bytes, offset = 0;
        std::function<void(char*)> set;
        void bind(void* block) const { set(bytes ? (char*)block + offset : nullptr); }
    };
    template <typename U>
    static Part part(U*& member, size_t count) {
        return {count * sizeof(U), 0, [&member](char* at) { member = reinterpret_cast<U*>(at); }};
    }
    std::vector<Part> saved_parts, host_parts;
    std::vector<void*> saved_blocks, host_blocks;  // one per slot
    int slot = 0;
    void* scratch_block = nullptr;

    T* layer_output(int l, size_t BT) const {
        return residual3 + (size_t)(cycling() ? l % 2 : l) * rows(BT) * cfg.channels;
    }
    T* kept_output(int l, size_t BT) const {
        return (offload_outputs ? residual3_host : residual3_parts) + (size_t)l * saved_rows(BT) * cfg.channels;
    }

    // One allocation, each part starting 256-byte aligned (the parts learn their offsets).
    void* carve(std::vector<Part>& parts, MemKind kind, Arena arena, const char* name) {
        size_t total = 0;
        for (Part& p : parts) {
            p.offset = total;
            total += round_up(p.bytes, 256);
        }
        return mem.allocate(total, kind, arena, name, false);
    }
};
