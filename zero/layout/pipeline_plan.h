// The pipeline plan: which transformer layers each pipeline stage holds, and
// where every rank sits in the 3-D grid. Pure and host-only, like the shard
// plan and the tensor-parallel plan beside it.
//
// Partition: stage s holds layers [first(s), first(s) + layers(s)), the first
// stage the embeddings, the last the final layernorm, the LM head and its copy
// of the embeddings unit (zero/README.md, "Pipeline stages"). An even split
// gives the first L mod P stages one layer more (the last already carries the
// LM head and the loss); --pp_layers sets the counts by hand.
//
// The grid (Megatron's order): rank = (stage * dp + dp_rank) * tp + tp_rank, so
// within a stage it is tp_plan.h's grid; a pipeline group is the pp ranks with
// the same (dp_rank, tp_rank), dp * tp apart.
#pragma once

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

// The layers and ends one stage's parameter layout holds. The default is the
// whole model (no pipeline).
struct StageRange {
    int stage = 0, stages = 1;
    int first_layer = 0;
    int num_layers = -1;  // -1: every layer of the model
    bool first = true;    // holds the embeddings (and the encoder)
    bool last = true;     // holds the final layernorm and the LM head (with its copy of wte)
};

struct PipelinePlan {
    std::vector<int> layers;  // per stage

    int stages() const { return (int)layers.size(); }
    int first_layer(int s) const { return std::accumulate(layers.begin(), layers.begin() + s, 0); }
    StageRange range(int s) const {
        return {.stage = s, .stages = stages(), .first_layer = first_layer(s), .num_layers = layers[s],
                .first = s == 0, .last = s == stages() - 1};
    }
    // the stage holding unit g of the whole model (0: embeddings, 1 + layer, L + 1: final layernorm); the
    // embeddings' first copy, on stage 0. A plan of no stages is one stage.
    int stage_of_unit(int g, int L) const {
        if (stages() <= 1 || g == 0) return 0;
        return g == L + 1 ? stages() - 1 : stage_of_layer(g - 1);
    }
    int stage_of_layer(int l) const {
        for (int s = 0, f = 0; s < stages(); f += layers[s], s++)
            if (l < f + layers[s]) return s;
        return -1;
    }
    std::string text() const {  // "2,1,1"
        std::string t;
        for (int s = 0; s < stages(); s++) t += (s ? "," : "") + std::to_string(layers[s]);
        return t;
    }
};

// P stages as even as possible: the first L mod P get one layer more.
inline PipelinePlan even_pipeline_plan(int L, int P) {
    PipelinePlan p;
    for (int s = 0; s < P; s++) p.layers.push_back(L / P + (s < L % P ? 1 : 0));
    return p;
}

// "a,b,..." as layer counts; empty on a malformed list (the error says so).
inline std::vector<int> parse_layer_counts(const std::string& text) {
    std::vector<int> out;
    size_t pos = 0;
    while (pos <= text.size()) {
        size_t comma = text.find(',', pos);
        std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        char* end = nullptr;
        long v = strtol(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < -1000000 || v > 1000000) return {};
        out.push_back((int)v);
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

// Empty when `pp_layers` (or, if empty, the even split) cuts L layers into P
// stages of at least one layer each; otherwise one line saying why not.
inline std::string pipeline_plan_error(int L, int P, const std::string& pp_layers) {
    if (P < 1) return "--pp must be at least 1 (got " + std::to_string(P) + ")";
    if (P > L)
        return "--pp " + std::to_string(P) + " is more stages than the model's " + std::to_string(L) +
               " layers: every stage holds at least one layer";
    if (pp_layers.empty()) return "";
    std::vector<int> counts = parse_layer_counts(pp_layers);
    if (counts.empty()) return "--pp_layers '" + pp_layers + "': expected layer counts like 2,1,1";
    if ((int)counts.size() != P)
        return "--pp_layers '" + pp_layers + "' gives " + std::to_string(counts.size()) + " stage(s), --pp is " +
               std::to_string(P);
    int sum = 0;
    for (int c : counts) {
        if (c < 1) return "--pp_layers '" + pp_layers + "': every stage holds at least one layer";
        sum += c;
    }
    if (sum != L)
        return "--pp_layers '" + pp_layers + "' sums to " + std::to_string(sum) + " layers, the model has " +
               std::to_string(L);
    return "";
}

// The plan of a run (after pipeline_plan_error said yes).
inline PipelinePlan make_pipeline_plan(int L, int P, const std::string& pp_layers) {
    return pp_layers.empty() ? even_pipeline_plan(L, P) : PipelinePlan{parse_layer_counts(pp_layers)};
}

// The 3-D grid (see the header): world = dp * tp * pp.
struct Grid3 {
    int dp = 1, tp = 1, pp = 1;
    int world() const { return dp * tp * pp; }
    int stage(int rank) const { return rank / (dp * tp); }
    int dp_rank(int rank) const { return rank / tp % dp; }
    int tp_rank(int rank) const { return rank % tp; }
    int rank_of(int stage, int dp_rank, int tp_rank) const { return (stage * dp + dp_rank) * tp + tp_rank; }
};

// Empty when `world` ranks make a dp x tp x pp grid; otherwise one line.
inline std::string grid3_error(int world, int tp, int pp) {
    if (tp < 1 || pp < 1) return "--tp and --pp must be at least 1";
    if (world % (tp * pp) != 0)
        return "world size " + std::to_string(world) + " is not a multiple of --tp " + std::to_string(tp) +
               " x --pp " + std::to_string(pp) + ": the ranks form a dp x tp x pp grid";
    return "";
}
