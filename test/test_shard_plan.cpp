// The shard plan and the parameter layout on their own: the offset arithmetic
// every stage relies on, for many (model, world size) pairs, including world
// sizes that divide nothing evenly, and a generic plan with odd sizes.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "test/model_shapes.h"
#include "test/test_util.h"
#include "zero/engine/memory_predictor.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"

// Every property of one plan, checked element by element where it is cheap.
static void check_plan(const ShardPlan& plan, const char* what) {
    const int N = plan.nranks;
    size_t full = 0, shard = 0, real = 0;
    for (int u = 0; u < plan.num_units(); u++) {
        EXPECT(plan.padded[u] % (N * plan.align) == 0, "%s unit %d: padded %zu not a multiple of N*align", what, u,
               plan.padded[u]);
        EXPECT(plan.padded[u] >= plan.units[u].numel && plan.padded[u] < plan.units[u].numel + N * plan.align,
               "%s unit %d: padding %zu beyond what alignment needs", what, u, plan.padded[u] - plan.units[u].numel);
        EXPECT(plan.full_offset[u] == full && plan.shard_offset[u] == shard, "%s unit %d: offsets not contiguous",
               what, u);
        EXPECT(plan.slice_numel(u) * N == plan.padded[u], "%s unit %d: slices do not tile the unit", what, u);
        size_t real_in_slices = 0;
        for (int r = 0; r < N; r++) {
            EXPECT(plan.slice_full_offset(u, r) == full + r * plan.slice_numel(u), "%s: slice offset", what);
            real_in_slices += plan.slice_real_numel(u, r);
            // round trips at the slice's ends
            for (size_t at : {(size_t)0, plan.slice_numel(u) - 1}) {
                size_t f = plan.slice_full_offset(u, r) + at;
                EXPECT(plan.owner_of(f) == r, "%s: owner of %zu", what, f);
                EXPECT(plan.full_to_shard(f) == shard + at, "%s: full_to_shard(%zu)", what, f);
                EXPECT(plan.shard_to_full(r, shard + at) == f, "%s: shard_to_full", what);
                EXPECT(plan.unit_of(f) == u && plan.unit_of_shard(shard + at) == u, "%s: unit_of", what);
            }
        }
        EXPECT(real_in_slices == plan.units[u].numel, "%s unit %d: slices hold %zu real elements, unit has %zu", what,
               u, real_in_slices, plan.units[u].numel);
        full += plan.padded[u];
        shard += plan.padded[u] / N;
        real += plan.units[u].numel;
    }
    EXPECT(plan.full_numel == full && plan.shard_numel == shard && plan.real_numel == real,
           "%s: totals %zu %zu %zu", what, plan.full_numel, plan.shard_numel, plan.real_numel);
    EXPECT(plan.shard_numel * N == plan.full_numel, "%s: N shards are not the full buffer", what);

    // The ranks' pieces cover every tensor element exactly once, each at the
    // right place in the full buffer and in its owner's shard; padding is in none.
    std::vector<unsigned char> covered(plan.full_numel, 0);
    for (int r = 0; r < N; r++) {
        size_t last_shard_end = 0;
        for (const ShardPiece& p : plan.pieces_of_rank(r)) {
            EXPECT(p.shard_offset >= last_shard_end, "%s rank %d: pieces not in shard order", what, r);
            last_shard_end = p.shard_offset + p.numel;
            EXPECT(p.shard_offset + p.numel <= plan.shard_numel, "%s: piece beyond the shard", what);
            EXPECT(plan.full_to_shard(p.full_offset) == p.shard_offset && plan.owner_of(p.full_offset) == r,
                   "%s rank %d: piece offsets disagree", what, r);
            EXPECT(plan.owner_of(p.full_offset + p.numel - 1) == r, "%s rank %d: piece crosses a slice", what, r);
            for (size_t i = p.full_offset; i < p.full_offset + p.numel; i++) covered[i]++;
        }
    }
    std::vector<unsigned char> is_tensor(plan.full_numel, 0);
    for (const ShardPiece& p : plan.pieces_full())
        for (size_t i = p.full_offset; i < p.full_offset + p.numel; i++) is_tensor[i]++;
    size_t bad = 0;
    for (size_t i = 0; i < plan.full_numel; i++) bad += covered[i] != is_tensor[i] || is_tensor[i] > 1;
    EXPECT(bad == 0, "%s: %zu elements covered wrongly by the ranks' pieces", what, bad);
}

int main() {
    // GPT-2 parameter counts as published for llm.c's d12 and d48 (padded vocabulary 50304)
    EXPECT_EQ(ParamLayout(gpt2_config_from_descriptor("d12")).num_parameters(), 124475904);
    EXPECT_EQ(ParamLayout(gpt2_config_from_descriptor("d48")).num_parameters(), 1557686400);

    // the layout: units hold every tensor once; the file order is a permutation
    for (const char* desc : {TINY_T64, "L=3,H=3,C=72,V=1001,T=50", "d12"}) {
        ParamLayout layout(gpt2_config_from_descriptor(desc));
        std::vector<unsigned char> seen(layout.file_numel(), 0);
        size_t in_units = 0;
        for (int u = 0; u < layout.num_units(); u++) {
            UnitSpec spec = layout.unit_spec(u);
            size_t end = 0;
            for (const TensorSpec& t : spec.tensors) {
                EXPECT(t.offset_in_unit >= end && t.offset_in_unit % TENSOR_ALIGN == 0,
                       "%s: %s misplaced in unit %d", desc, param_tensor_name(t.id), u);
                end = t.offset_in_unit + t.numel;
                EXPECT(layout.unit_of_tensor(t.id, t.layer) == u, "%s: unit_of_tensor", desc);
                size_t f = layout.file_offset(t.id, t.layer);
                for (size_t i = f; i < f + t.numel && i < seen.size(); i++) seen[i]++;
                in_units += t.numel;
            }
            EXPECT(end == spec.numel, "%s unit %d: numel %zu, tensors end at %zu", desc, u, spec.numel, end);
        }
        EXPECT(in_units == layout.file_numel(), "%s: %zu elements in units, %zu in the file", desc, in_units,
               layout.file_numel());
        EXPECT(std::count(seen.begin(), seen.end(), 1) == (long)seen.size(), "%s: file order is not a permutation",
               desc);
    }

    // plans for GPT-2 shapes at many world sizes
    for (const char* desc : {TINY_T64, "L=3,H=3,C=72,V=1001,T=50", "d12"}) {
        ParamLayout layout(gpt2_config_from_descriptor(desc));
        for (int N : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 64, 100}) {
            ShardPlan plan(layout.unit_specs(), N, SHARD_ALIGN);
            std::string err = plan.validate();
            size_t smallest = layout.unit_spec(layout.final_unit()).numel;
            EXPECT(err.empty() == ((size_t)N <= smallest), "%s N=%d: validate says '%s'", desc, N, err.c_str());
            if (!err.empty()) continue;
            char what[96];
            snprintf(what, sizeof(what), "%s N=%d", desc, N);
            check_plan(plan, what);
        }
    }

    // a generic plan: odd unit and tensor sizes, gaps between tensors
    std::vector<UnitSpec> odd = {
        {"a", 7, {{0, 0, 0, 3}, {1, 0, 4, 3}}},
        {"b", 12345, {{2, 0, 0, 1000}, {3, 0, 1000, 11345}}},
        {"c", 1, {{4, 0, 0, 1}}},
        {"d", 999, {{5, 0, 17, 500}, {6, 0, 600, 399}}},
    };
    for (int N : {1, 2, 3, 7}) {
        ShardPlan plan(odd, N, 4);
        EXPECT(plan.validate().empty() == (N <= 1), "generic N=%d validate", N);  // unit c has one element
        char what[32];
        snprintf(what, sizeof(what), "generic N=%d", N);
        check_plan(plan, what);
    }

    // zero/README.md's worked example, number for number: unit 0 holds W (40
    // elements) and b (6, at the next 16-element boundary, 48), unit 1 holds c
    // (20); four ranks; each unit padded to 64 and cut into four slices of 16
    {
        std::vector<UnitSpec> example = {{"unit 0", 54, {{0, 0, 0, 40}, {1, 0, 48, 6}}}, {"unit 1", 20, {{2, 0, 0, 20}}}};
        ShardPlan plan(example, 4, SHARD_ALIGN);
        EXPECT(plan.padded[0] == 64 && plan.padded[1] == 64 && plan.full_offset[1] == 64 && plan.shard_offset[1] == 16 &&
                   plan.full_numel == 128 && plan.shard_numel == 32,
               "the example's offsets: P %zu %zu, F(1) %zu, S(1) %zu", plan.padded[0], plan.padded[1],
               plan.full_offset[1], plan.shard_offset[1]);
        struct Piece {
            int tensor;
            size_t full, shard, numel;
        };
        const std::vector<Piece> want[4] = {
            {{0, 0, 0, 16}, {2, 64, 16, 16}},  // rank 0: W[0:16], c[0:16]
            {{0, 16, 0, 16}, {2, 80, 16, 4}},  // rank 1: W[16:32], c[16:20]
            {{0, 32, 0, 8}},                   // rank 2: W[32:40] (40..48 and unit 1's slice: padding)
            {{1, 48, 0, 6}},                   // rank 3: b[0:6]
        };
        for (int r = 0; r < 4; r++) {
            std::vector<ShardPiece> got = plan.pieces_of_rank(r);
            bool same = got.size() == want[r].size();
            for (size_t i = 0; same && i < got.size(); i++)
                same = got[i].tensor_id == want[r][i].tensor && got[i].full_offset == want[r][i].full &&
                       got[i].shard_offset == want[r][i].shard && got[i].numel == want[r][i].numel;
            EXPECT(same, "the example's rank %d pieces", r);
        }
    }

    // the world-size guard names the unit
    ShardPlan too_many(ParamLayout(gpt2_config_from_descriptor(TINY_T64)).unit_specs(), 200,
                       SHARD_ALIGN);
    EXPECT(too_many.validate().find("final_layernorm") != std::string::npos, "message: %s",
           too_many.validate().c_str());

    // the paper's Figure 1: Psi = 7.5B, N = 64 -> 120 / 31.4 / 16.6 / 1.9 GB per device
    const double want[4] = {120.0, 31.4, 16.6, 1.9};
    for (int stage = 0; stage < 4; stage++) {
        double gb = model_state_bytes(7.5e9, stage, 64).total() / 1e9;
        EXPECT(std::fabs(gb - want[stage]) < 0.05, "stage %d: %.3f GB, the paper says %.1f", stage, gb, want[stage]);
    }
    return test_summary("shard_plan");
}
