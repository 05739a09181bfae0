// Where every GPT-2 parameter tensor lives. This is the only file that knows
// the model's tensors, their shapes and their order; everything else asks it.
//
// Two orders over the same tensors:
//   * unit-major (our flat buffer): unit 0 = {wte, wpe}; unit 1+l = layer l's
//     twelve tensors; unit L+1 = {lnfw, lnfb}. The LM head is tied to wte.
//   * tensor-major (llm.c's model files): all wte, all wpe, then each per-layer
//     tensor for every layer in turn (ln1w of layers 0..L-1, ln1b of ...), then
//     lnfw, lnfb. Loading or saving a file is a permutation between the two.
//
// A layout may be one tensor rank's part (t > 1: the units are t-local,
// tp_shape() says how each tensor is cut) and one pipeline stage's units
// (StageRange: numbered locally, global_unit() maps them; the last stage's copy
// of the embeddings unit carries wpe along unused): zero/README.md, "Two
// slicings" and "Pipeline stages". The file order, num_parameters(), layer
// numbers and initial values stay those of the whole model.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "zero/base/rng.h"
#include "zero/layout/gpt2_config.h"
#include "zero/layout/pipeline_plan.h"
#include "zero/layout/shard_plan.h"
#include "zero/layout/tp_plan.h"

enum ParamTensor : int {
    WTE, WPE,                                         // unit 0
    LN1W, LN1B, QKVW, QKVB, ATTPROJW, ATTPROJB,       // units 1..L
    LN2W, LN2B, FCW, FCB, FCPROJW, FCPROJB,
    LNFW, LNFB,                                       // unit L+1
    NUM_PARAM_TENSORS
};
constexpr int FIRST_LAYER_TENSOR = LN1W, LAST_LAYER_TENSOR = FCPROJB;
constexpr int TENSORS_PER_LAYER = LAST_LAYER_TENSOR - FIRST_LAYER_TENSOR + 1;

inline const char* param_tensor_name(int t) {
    static const char* names[NUM_PARAM_TENSORS] = {"wte",  "wpe",  "ln1w", "ln1b",     "qkvw", "qkvb",
                                                    "attprojw", "attprojb", "ln2w", "ln2b", "fcw",  "fcb",
                                                    "fcprojw",  "fcprojb",  "lnfw", "lnfb"};
    return names[t];
}

inline bool is_layer_tensor(int t) { return t >= FIRST_LAYER_TENSOR && t <= LAST_LAYER_TENSOR; }

// Decoupled weight decay applies to matrices and embeddings, not to biases or
// layernorm gains.
inline bool tensor_has_weight_decay(int t) {
    return t == WTE || t == WPE || t == QKVW || t == ATTPROJW || t == FCW || t == FCPROJW;
}

// Tensors start at multiples of this many elements inside their unit, so that
// vectorised kernels see aligned pointers whatever the channel count.
constexpr size_t TENSOR_ALIGN = 16;

struct ParamLayout {
    GPT2Config cfg;
    int tp = 1;  // tensor-parallel degree: the units hold one tensor-parallel rank's part
    StageRange stage;  // the pipeline stage whose units these are (the whole model by default)

    explicit ParamLayout(const GPT2Config& c, int tensor_parallel = 1, StageRange s = StageRange{})
        : cfg(c), tp(tensor_parallel), stage(s) {
        if (stage.num_layers < 0) stage.first_layer = 0, stage.num_layers = cfg.num_layers;
    }
    // the same stage with whole tensors (t = 1): the full tensors' values of its units
    ParamLayout whole_tensors() const { return ParamLayout(cfg, 1, stage); }

    bool pipelined() const { return stage.stages > 1; }
    bool has_embed() const { return stage.first || stage.last; }
    bool head_copy() const { return stage.last && !stage.first; }  // unit 0 is the LM head's copy of wte
    int num_units() const { return (has_embed() ? 1 : 0) + stage.num_layers + (stage.last ? 1 : 0); }
    int embed_unit() const { return has_embed() ? 0 : -1; }
    int layer_unit(int l) const { return (has_embed() ? 1 : 0) + l - stage.first_layer; }  // l: a layer of this stage
    int final_unit() const { return stage.last ? num_units() - 1 : -1; }
    // the unit of the whole model (0, 1 + layer, L + 1) that local unit u is, and back (-1: not on this stage)
    int global_unit(int u) const {
        return u == embed_unit() ? 0 : u == final_unit() ? cfg.num_layers + 1 : 1 + stage.first_layer + u - layer_unit(stage.first_layer);
    }
    int local_unit(int g) const {
        if (g == 0) return embed_unit();
        if (g == cfg.num_layers + 1) return final_unit();
        int l = g - 1;
        return l >= stage.first_layer && l < stage.first_layer + stage.num_layers ? layer_unit(l) : -1;
    }

    // How tensor t is cut across a tensor group (Megatron's scheme for GPT-2):
    // QKV by heads (q, k and v each cut by rows), fc by rows, the two projections
    // by columns, wte by vocabulary rows; the rest replicated.
    TpTensorShape tp_shape(int t) const {
        size_t C = cfg.channels, Vp = cfg.padded_vocab_size, maxT = cfg.max_seq_len;
        switch (t) {
            case WTE: return {Vp, C, TpSplit::Rows, 1};
            case QKVW: return {3 * C, C, TpSplit::Rows, 3};
            case QKVB: return {3 * C, 1, TpSplit::Rows, 3};
            case ATTPROJW: return {C, C, TpSplit::Cols, 1};
            case FCW: return {4 * C, C, TpSplit::Rows, 1};
            case FCB: return {4 * C, 1, TpSplit::Rows, 1};
            case FCPROJW: return {C, 4 * C, TpSplit::Cols, 1};
            case WPE: return {maxT, C, TpSplit::Replicated, 1};
            default: return {C, 1, TpSplit::Replicated, 1};
        }
    }
    bool tp_replicated(int t) const { return tp_shape(t).split == TpSplit::Replicated; }

    // elements of one copy of tensor t in this layout (t-local)
    size_t numel(int t) const { return tp_local_numel(tp_shape(t), tp); }

    // elements of one copy of tensor t in the full model
    size_t full_numel(int t) const { return tp_shape(t).rows * tp_shape(t).cols; }
    // copies of tensor t in the model (L for per-layer tensors)
    int copies(int t) const { return is_layer_tensor(t) ? cfg.num_layers : 1; }

    // the tensors of a unit kind, in unit order
    static int first_tensor_of_unit_kind(int kind) { return kind == 0 ? WTE : kind == 1 ? FIRST_LAYER_TENSOR : LNFW; }
    static int last_tensor_of_unit_kind(int kind) { return kind == 0 ? WPE : kind == 1 ? LAST_LAYER_TENSOR : LNFB; }
    int unit_kind(int u) const { return u == embed_unit() ? 0 : u == final_unit() ? 2 : 1; }

    // where tensor t starts inside its unit (same for every layer)
    size_t offset_in_unit(int t) const {
        int kind = t <= WPE ? 0 : is_layer_tensor(t) ? 1 : 2;
        size_t off = 0;
        for (int s = first_tensor_of_unit_kind(kind); s < t; s++) off += round_up(numel(s), TENSOR_ALIGN);
        return off;
    }

    UnitSpec unit_spec(int u) const {
        int kind = unit_kind(u);
        int layer = kind == 1 ? global_unit(u) - 1 : 0;
        UnitSpec spec{.name = kind == 0 ? "embeddings" : kind == 2 ? "final_layernorm" : "layer" + std::to_string(layer)};
        int last = last_tensor_of_unit_kind(kind);
        for (int t = first_tensor_of_unit_kind(kind); t <= last; t++)
            spec.tensors.push_back({t, layer, offset_in_unit(t), numel(t)});
        spec.numel = offset_in_unit(last) + numel(last);
        return spec;
    }
    std::vector<UnitSpec> unit_specs() const {
        std::vector<UnitSpec> specs;
        for (int u = 0; u < num_units(); u++) specs.push_back(unit_spec(u));
        return specs;
    }
    int unit_of_tensor(int t, int layer) const {
        return t <= WPE ? embed_unit() : is_layer_tensor(t) ? layer_unit(layer) : final_unit();
    }

    // --- llm.c's tensor-major file order (of the full model) ---------------
    size_t file_offset(int t, int layer) const {
        size_t off = 0;
        for (int s = 0; s < t; s++) off += full_numel(s) * copies(s);
        return off + (size_t)layer * full_numel(t);
    }
    size_t file_numel() const { return file_offset(NUM_PARAM_TENSORS - 1, 0) + full_numel(NUM_PARAM_TENSORS - 1); }

    // the number of trainable parameters (padded vocabulary rows included, as llm.c counts)
    size_t num_parameters() const { return file_numel(); }

    // --- GPT-2 initialisation --------------------------------------------
    // std of the normal init of tensor t, or 0 for the constant ones (gains 1,
    // biases 0). Residual projections are scaled by 1/sqrt(2L) as in GPT-2.
    float init_std(int t) const {
        switch (t) {
            case WTE: case WPE: case QKVW: case FCW: return 0.02f;
            case ATTPROJW: case FCPROJW: return 0.02f / sqrtf(2.0f * cfg.num_layers);
            default: return 0.0f;
        }
    }
    float init_constant(int t) const { return (t == LN1W || t == LN2W || t == LNFW) ? 1.0f : 0.0f; }
    // rows >= V of the padded wte are zero forever: no token selects them and the
    // loss ignores their logits, so only weight decay ever touches them
    size_t init_real_numel(int t) const {
        return t == WTE ? (size_t)cfg.vocab_size * cfg.channels : full_numel(t);
    }
    // Unit u's initial values from a seed into dst (its numel elements):
    // element i of tensor t, layer l gets N(0, std_t) from the counter-based
    // generator keyed by (seed, t, l, i), so every rank computes the same value
    // for it whatever the world size. With tensor parallelism i is the
    // element's index in the full tensor: the full unit is drawn (into
    // `scratch`) and tensor rank p's part cut from it.
    void initial_unit(int u, uint64_t seed, int p, float* dst, std::vector<float>& scratch) const {
        ParamLayout whole = whole_tensors();
        if (tp > 1) scratch.assign(whole.unit_spec(u).numel, 0.0f);
        float* values = tp > 1 ? scratch.data() : dst;
        for (const TensorSpec& ts : whole.unit_spec(u).tensors) {
            float std_ = init_std(ts.id), c = init_constant(ts.id);
            uint64_t stream_seed = mix64(seed ^ mix64(((uint64_t)ts.id << 32) | (uint64_t)ts.layer));
            size_t real = init_real_numel(ts.id);
            float* out = values + ts.offset_in_unit;
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < real; i++) out[i] = std_ > 0 ? std_ * random_normal(stream_seed, i) : c;
        }
        if (tp > 1) tp_slice_unit(p, u, scratch.data(), dst);
    }

    // --- tensor parallelism ----------------------------------------------
    // The first padded-vocabulary row of wte that tensor-parallel rank p holds.
    int vocab_begin(int p) const { return cfg.padded_vocab_size / tp * p; }

    // Calls f(local, full, n) for each contiguous run of tensor-parallel rank p's
    // part of unit u: `local` is an offset in this layout's unit u, `full` in the
    // full model's (t = 1) unit u.
    template <typename F>
    void for_each_tp_run(int p, int u, F f) const {
        ParamLayout whole(cfg, 1);
        for (const TensorSpec& ts : unit_spec(u).tensors) {
            size_t l0 = ts.offset_in_unit, f0 = whole.offset_in_unit(ts.id);
            tp_for_each_run(tp_shape(ts.id), tp, p, [&](size_t lo, size_t fo, size_t n) { f(l0 + lo, f0 + fo, n); });
        }
    }
    // Rank p's part of unit u from the full unit's values, and back (the rest of
    // `full` is left as it is).
    template <typename E>
    void tp_slice_unit(int p, int u, const E* full, E* local) const {
        for_each_tp_run(p, u, [&](size_t lo, size_t fo, size_t n) { std::copy(full + fo, full + fo + n, local + lo); });
    }
    template <typename E>
    void tp_place_unit(int p, int u, const E* local, E* full) const {
        for_each_tp_run(p, u, [&](size_t lo, size_t fo, size_t n) { std::copy(local + lo, local + lo + n, full + fo); });
    }
};

// Empty when GPT-2 of this shape cuts evenly across t tensor-parallel ranks;
// otherwise one line saying what does not divide.
inline std::string tensor_parallel_error(const GPT2Config& c, int t) {
    if (t < 1) return "--tp must be at least 1 (got " + std::to_string(t) + ")";
    const struct { int n; const char *before, *after; } cuts[] = {  // what a rank holds whole pieces of
        {c.num_heads, "the ", " attention heads (each tensor-parallel rank computes whole heads)"},
        {4 * c.channels, "the MLP's 4C = ", " hidden features"},
        {c.padded_vocab_size, "the padded vocabulary of ", " rows"}};
    for (const auto& cut : cuts)
        if (cut.n % t != 0)
            return "--tp " + std::to_string(t) + " does not divide " + cut.before + std::to_string(cut.n) + cut.after;
    ParamLayout layout(c, t);
    for (int s = 0; s < NUM_PARAM_TENSORS; s++) {
        std::string err = tp_shape_error(layout.tp_shape(s), t, param_tensor_name(s));
        if (!err.empty()) return err;
    }
    return "";
}

// --- typed views of one unit's tensors --------------------------------------
// The model code receives a unit's base pointer (full, gathered parameters or
// gradients) and reads its tensors through these; no offsets anywhere else.

template <typename T> struct EmbedTensors {
    T* wte;  // (Vp, C)
    T* wpe;  // (maxT, C)
};
template <typename T> struct LayerTensors {
    T* ln1w; T* ln1b;          // (C)
    T* qkvw; T* qkvb;          // (3C, C), (3C)
    T* attprojw; T* attprojb;  // (C, C), (C)
    T* ln2w; T* ln2b;          // (C)
    T* fcw; T* fcb;            // (4C, C), (4C)
    T* fcprojw; T* fcprojb;    // (C, 4C), (C)
};
template <typename T> struct FinalTensors {
    T* lnfw; T* lnfb;  // (C)
};

template <typename T> EmbedTensors<T> embed_tensors(const ParamLayout& p, T* base) {
    return {base + p.offset_in_unit(WTE), base + p.offset_in_unit(WPE)};
}
template <typename T> LayerTensors<T> layer_tensors(const ParamLayout& p, T* base) {
    LayerTensors<T> v;
    T** out[TENSORS_PER_LAYER] = {&v.ln1w, &v.ln1b, &v.qkvw,  &v.qkvb,  &v.attprojw, &v.attprojb,
                                  &v.ln2w, &v.ln2b, &v.fcw,   &v.fcb,   &v.fcprojw,  &v.fcprojb};
    for (int i = 0; i < TENSORS_PER_LAYER; i++) *out[i] = base + p.offset_in_unit(FIRST_LAYER_TENSOR + i);
    return v;
}
template <typename T> FinalTensors<T> final_tensors(const ParamLayout& p, T* base) {
    return {base + p.offset_in_unit(LNFW), base + p.offset_in_unit(LNFB)};
}
