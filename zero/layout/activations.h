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
#pragma once

#include <vector>

#include "zero/layout/gpt2_config.h"
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

// How many copies of each per-layer buffer exist: L, or 1 when recomputed.
struct ActivationPlan {
    int copies_main;   // ln1.. fch: L, or 1 with recompute 2
    int copies_gelu;   // fch_gelu: L, or 1 with recompute >= 1
    static ActivationPlan of(int L, int recompute) {
        return {recompute >= 2 ? 1 : L, recompute >= 1 ? 1 : L};
    }
};

template <typename T>
class Activations {
  public:
    // Sized for micro-batch B and sequence length T_ (the maxima: passes may use fewer).
    Activations(const GPT2Config& cfg_, int B, int T_, int recompute_, bool offload_outputs_, MemoryAccountant& mem_)
        : cfg(cfg_), maxBT((size_t)B * T_), recompute(recompute_), offload_outputs(offload_outputs_), mem(mem_) {
        CHECK(!offload_outputs || recompute == 2, "activation offload needs -r 2 (only layer outputs are kept)");
        plan = ActivationPlan::of(cfg.num_layers, recompute);
        size_t BT = maxBT, C = cfg.channels, L = cfg.num_layers, NH = cfg.num_heads, Vp = cfg.padded_vocab_size;
        size_t cm = plan.copies_main, cg = plan.copies_gelu, co = offload_outputs ? 2 : L;
        // saved activations, in one allocation
        std::vector<Part> saved = {
            {&encoded, BT * C, sizeof(T)},          {&ln1, cm * BT * C, sizeof(T)},
            {&ln1_stats, cm * 2 * BT, 4},           {&qkv, cm * BT * 3 * C, sizeof(T)},
            {&atty, cm * BT * C, sizeof(T)},        {&att_lse, cm * NH * BT, 4},
            {&residual2, cm * BT * C, sizeof(T)},   {&ln2, cm * BT * C, sizeof(T)},
            {&ln2_stats, cm * 2 * BT, 4},           {&fch, cm * BT * 4 * C, sizeof(T)},
            {&fch_gelu, cg * BT * 4 * C, sizeof(T)}, {&residual3, co * BT * C, sizeof(T)},
            {&lnf, BT * C, sizeof(T)},              {&lnf_stats, 2 * BT, 4},
            {&logits, BT * Vp, sizeof(T)},          {&losses, BT, 4},
            {&loss_sums, BT, 4},
            {&tokens, 2 * BT, 4},
        };
        saved_block = carve(saved, MemKind::Activations, Arena::Device, "activations");
        if (offload_outputs)
            host_block = carve({{&residual3_host, L * BT * C, sizeof(T)}}, MemKind::Activations, Arena::Host,
                               "layer_outputs_host");
        // scratch: a branch output in forward; the residual stream's and one layer's gradients in backward
        std::vector<Part> scratch = {
            {&branch, BT * C, sizeof(T)},
            {&dresidual, BT * C, sizeof(T)}, {&dbtc, BT * C, sizeof(T)},
            {&dqkv, BT * 3 * C, sizeof(T)},  {&dfch, BT * 4 * C, sizeof(T)},
        };
        scratch_block = carve(scratch, MemKind::Scratch, Arena::Device, "backward_scratch");
    }

    const GPT2Config cfg;
    const size_t maxBT;
    const int recompute;
    const bool offload_outputs;
    ActivationPlan plan;

    // saved by forward
    void* encoded;    // (B, T, C)
    void* ln1;        // per layer ...
    void* ln1_stats;
    void* qkv;
    void* atty;
    void* att_lse;
    void* residual2;
    void* ln2;
    void* ln2_stats;
    void* fch;
    void* fch_gelu;
    void* residual3;  // (L, B, T, C): each layer's output; (2, B, T, C) with offload_outputs
    void* residual3_host = nullptr;  // (L, B, T, C) on the host with offload_outputs
    void* lnf;        // (B, T, C)
    void* lnf_stats;  // (2, B, T): mean then rstd
    void* logits;     // (B, T, Vp): logits, then dlogits in place
    void* losses;     // (B, T) fp32
    void* loss_sums;  // (B, T) fp32: the losses of a step's micro-steps, summed
    void* tokens;     // (2, B, T) int: inputs then targets, on the device
    // scratch: never needed from one pass to the next
    void* branch;     // (B, T, C) a projection's output before it joins the residual stream
    void* dresidual;  // (B, T, C)
    void* dbtc;       // (B, T, C)
    void* dqkv;       // (B, T, 3C)
    void* dfch;       // (B, T, 4C)

    T* t(void* p) const { return (T*)p; }
    int* inputs() const { return (int*)tokens; }
    int* targets() const { return (int*)tokens + maxBT; }

    // Layer l's buffers for a pass over BT rows (BT <= maxBT). Copies shared by
    // all layers (recompute) are the same pointers for every l.
    LayerActs<T> layer(int l, size_t BT) const {
        size_t C = cfg.channels, NH = cfg.num_heads;
        size_t m = plan.copies_main == 1 ? 0 : l, g = plan.copies_gelu == 1 ? 0 : l;
        LayerActs<T> a;
        a.ln1 = t(ln1) + m * BT * C;
        a.ln1_mean = (float*)ln1_stats + m * 2 * BT;
        a.ln1_rstd = a.ln1_mean + BT;
        a.qkv = t(qkv) + m * BT * 3 * C;
        a.atty = t(atty) + m * BT * C;
        a.att_lse = (float*)att_lse + m * NH * BT;
        a.residual2 = t(residual2) + m * BT * C;
        a.ln2 = t(ln2) + m * BT * C;
        a.ln2_mean = (float*)ln2_stats + m * 2 * BT;
        a.ln2_rstd = a.ln2_mean + BT;
        a.fch = t(fch) + m * BT * 4 * C;
        a.fch_gelu = t(fch_gelu) + g * BT * 4 * C;
        a.residual3 = layer_output(l, BT);
        return a;
    }

    // the input of layer l: the embeddings, or the previous layer's output
    T* layer_input(int l, size_t BT) const { return l == 0 ? t(encoded) : layer_output(l - 1, BT); }

    // Offload: after layer l's forward, its output goes down to the host ...
    void save_layer_output(int l, size_t BT, Stream s) const {
        if (offload_outputs) device_copy(host_output(l, BT), layer_output(l, BT), BT * cfg.channels * sizeof(T), s);
    }
    // ... and before layer l is recomputed in backward, its input comes back up.
    void load_layer_input(int l, size_t BT, Stream s) const {
        if (offload_outputs && l > 0)
            device_copy(layer_output(l - 1, BT), host_output(l - 1, BT), BT * cfg.channels * sizeof(T), s);
    }

    // live from the start of forward until backward has consumed them
    void set_saved_live(bool live) {
        mem.set_live(saved_block, live);
        if (host_block) mem.set_live(host_block, live);
    }
    void set_scratch_live(bool live) { mem.set_live(scratch_block, live); }

  private:
    struct Part {
        void** ptr;
        size_t count;
        size_t elem;
    };
    MemoryAccountant& mem;
    void* saved_block = nullptr;
    void* scratch_block = nullptr;
    void* host_block = nullptr;

    T* layer_output(int l, size_t BT) const {
        return t(residual3) + (size_t)(offload_outputs ? l % 2 : l) * BT * cfg.channels;
    }
    T* host_output(int l, size_t BT) const { return t(residual3_host) + (size_t)l * BT * cfg.channels; }

    // One allocation, each part starting 256-byte aligned.
    void* carve(const std::vector<Part>& parts, MemKind kind, Arena arena, const char* name) {
        size_t total = 0;
        for (const Part& p : parts) total += round_up(p.count * p.elem, 256);
        char* base = (char*)mem.allocate(total, kind, arena, name, false);
        size_t off = 0;
        for (const Part& p : parts) {
            *p.ptr = base + off;
            off += round_up(p.count * p.elem, 256);
        }
        return base;
    }
};
