// The tensor-parallel plan on its own: which elements of each tensor a rank of
// a tensor group holds, checked element by element against an independent
// index formula, and its inverse tp_locate; the t-local layout's units; the grid; the refusals. Then the
// proof that the cuts fit the kernels: a GPT-2 block computed by t ranks on
// their parts (column-parallel QKV and fc, attention on local heads,
// row-parallel projections summed over the ranks) equals the block computed
// whole.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "test/model_shapes.h"
#include "test/test_util.h"
#include "zero/base/rng.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/tp_plan.h"

// Where element (r, c) of rank p's local (row-major) part sits in the full
// tensor: written from the definition, apart from tp_for_each_run.
static size_t full_index_of_local(const TpTensorShape& s, int t, int p, size_t local) {
    if (s.split == TpSplit::Replicated) return local;
    if (s.split == TpSplit::Cols) {
        size_t lc = s.cols / t, r = local / lc, c = local % lc;
        return r * s.cols + p * lc + c;
    }
    size_t group_rows = s.rows / s.row_groups, mine = group_rows / t;
    size_t r = local / s.cols, c = local % s.cols;
    size_t g = r / mine, within = r % mine;
    return (g * group_rows + p * mine + within) * s.cols + c;
}

static void check_shape(const TpTensorShape& s, int t, const char* what) {
    size_t full = s.rows * s.cols, local = tp_local_numel(s, t);
    std::vector<int> owners(full, 0);
    for (int p = 0; p < t; p++) {
        std::vector<int> seen(local, 0);
        size_t next_local = 0;
        tp_for_each_run(s, t, p, [&](size_t lo, size_t fo, size_t n) {
            EXPECT(lo == next_local, "%s t=%d p=%d: runs not in local order (%zu, expected %zu)", what, t, p, lo,
                   next_local);
            next_local = lo + n;
            for (size_t i = 0; i < n && lo + i < local; i++) {
                seen[lo + i]++;
                size_t want = full_index_of_local(s, t, p, lo + i);
                if (fo + i != want) {
                    EXPECT(fo + i == want, "%s t=%d p=%d: local %zu -> full %zu, expected %zu", what, t, p, lo + i,
                           fo + i, want);
                    return;
                }
                owners[fo + i]++;
            }
        });
        EXPECT(next_local == local, "%s t=%d p=%d: runs cover %zu of %zu local elements", what, t, p, next_local,
               local);
        size_t once = 0;
        for (int x : seen) once += x == 1;
        EXPECT(once == local, "%s t=%d p=%d: local elements not covered exactly once", what, t, p);
    }
    // split tensors: every element has exactly one owner; replicated: every rank holds it
    int expected = s.split == TpSplit::Replicated ? t : 1;
    size_t right = 0;
    for (int x : owners) right += x == expected;
    EXPECT(right == full, "%s t=%d: %zu of %zu elements held by the wrong number of ranks", what, t, full - right,
           full);
    // tp_locate, the inverse (what a checkpoint's reader asks): the rank and
    // local offset of every full element, and a run that stays consecutive on
    // both sides and ends where the next full element lies elsewhere
    size_t wrong = 0;
    for (size_t f = 0; f < full; f++) {
        TpLocation at = tp_locate(s, t, f);
        bool ok = at.tp >= 0 && at.tp < t && at.local < local && at.run >= 1 && f + at.run <= full &&
                  full_index_of_local(s, t, at.tp, at.local) == f && (s.split != TpSplit::Replicated || at.tp == 0);
        if (ok && f + 1 < full) {
            TpLocation next = tp_locate(s, t, f + 1);
            bool continues = next.tp == at.tp && next.local == at.local + 1;
            ok = at.run > 1 ? continues && next.run == at.run - 1 : !continues;
        }
        wrong += !ok;
    }
    EXPECT(wrong == 0, "%s t=%d: tp_locate wrong for %zu of %zu elements", what, t, wrong, full);
}

// The t-local layout of one model: unit sizes, the round trip full -> parts ->
// full, and which tensors the ranks share.
static void check_layout(const char* desc, int t) {
    GPT2Config cfg = gpt2_config_from_descriptor(desc);
    ParamLayout whole(cfg, 1), local(cfg, t);
    // full_numel is tp_shape's rows x cols: the model's size in closed form is the independent count
    const size_t C = cfg.channels, L = cfg.num_layers;
    const size_t closed_form = (size_t)cfg.padded_vocab_size * C + (size_t)cfg.max_seq_len * C + 12 * L * C * C +
                               13 * L * C + 2 * C;
    size_t expected_count = 0;
    for (int s = 0; s < NUM_PARAM_TENSORS; s++) {
        TpTensorShape sh = local.tp_shape(s);
        EXPECT(sh.rows * sh.cols == whole.full_numel(s), "%s: %s shape %zux%zu vs %zu elements", desc,
               param_tensor_name(s), sh.rows, sh.cols, whole.full_numel(s));
        expected_count += whole.full_numel(s) * whole.copies(s);
        EXPECT(local.numel(s) * (local.tp_replicated(s) ? 1 : t) == whole.numel(s), "%s t=%d: %s local numel", desc,
               t, param_tensor_name(s));
    }
    EXPECT(expected_count == closed_form && whole.num_parameters() == closed_form,
           "%s: %zu parameters by tensor shapes, %zu in the file order, %zu in closed form", desc, expected_count,
           whole.num_parameters(), closed_form);
    EXPECT(local.num_parameters() == whole.num_parameters() && local.file_numel() == whole.file_numel(),
           "%s t=%d: the file order is the full model's", desc, t);
    for (int u = 0; u < whole.num_units(); u++) {
        UnitSpec fu = whole.unit_spec(u);
        std::vector<float> full(fu.numel), rebuilt(fu.numel, -1.0f);
        for (size_t i = 0; i < full.size(); i++) full[i] = (float)i;
        std::vector<int> holders(fu.numel, 0);
        for (int p = 0; p < t; p++) {
            std::vector<float> part(local.unit_spec(u).numel, -2.0f);
            local.tp_slice_unit(p, u, full.data(), part.data());
            local.tp_place_unit(p, u, part.data(), rebuilt.data());
            local.for_each_tp_run(p, u, [&](size_t, size_t fo, size_t n) {
                for (size_t i = 0; i < n; i++) holders[fo + i]++;
            });
        }
        for (const TensorSpec& ts : fu.tensors) {
            size_t bad = 0;
            int want = local.tp_replicated(ts.id) ? t : 1;
            for (size_t i = ts.offset_in_unit; i < ts.offset_in_unit + ts.numel; i++)
                bad += rebuilt[i] != full[i] || holders[i] != want;
            EXPECT(bad == 0, "%s t=%d unit %d: %s has %zu elements lost or held wrongly", desc, t, u,
                   param_tensor_name(ts.id), bad);
        }
    }
}

static std::vector<float> random_vector(size_t n, uint64_t seed, float scale) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = scale * random_normal(seed, i);
    return v;
}

static double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
    double worst = 0.0, norm = 0.0;
    for (size_t i = 0; i < a.size(); i++) norm = std::max(norm, (double)std::fabs(b[i]));
    for (size_t i = 0; i < a.size(); i++) worst = std::max(worst, std::fabs((double)a[i] - b[i]) / norm);
    return worst;
}

// One block's attention and MLP branches, whole and cut across t ranks.
static void check_block_equivalence(int t) {
    GPT2Config cfg = gpt2_config_from_descriptor(TINY);
    ParamLayout whole(cfg, 1), local(cfg, t);
    const int B = 2, T_ = 8, C = cfg.channels, NH = cfg.num_heads, BT = B * T_;
    int u = whole.layer_unit(0);
    std::vector<float> unit(whole.unit_spec(u).numel);
    for (const TensorSpec& ts : whole.unit_spec(u).tensors) {
        std::vector<float> v = random_vector(ts.numel, 100 + ts.id, 0.1f);
        std::copy(v.begin(), v.end(), unit.begin() + ts.offset_in_unit);
    }
    LayerTensors<const float> w = layer_tensors(whole, (const float*)unit.data());
    std::vector<float> x = random_vector((size_t)BT * C, 7, 1.0f);

    // whole: attention branch and MLP branch (both with their biases)
    std::vector<float> qkv((size_t)BT * 3 * C), atty((size_t)BT * C), lse((size_t)NH * BT), att_out((size_t)BT * C);
    std::vector<float> fch((size_t)BT * 4 * C), fch_gelu((size_t)BT * 4 * C), mlp_out((size_t)BT * C);
    matmul_forward_cpu(qkv.data(), x.data(), w.qkvw, w.qkvb, BT, C, 3 * C, (float*)nullptr);
    attention_forward_cpu(atty.data(), lse.data(), qkv.data(), B, T_, C, NH);
    matmul_forward_cpu(att_out.data(), atty.data(), w.attprojw, w.attprojb, BT, C, C, (float*)nullptr);
    matmul_forward_cpu(fch_gelu.data(), x.data(), w.fcw, w.fcb, BT, C, 4 * C, fch.data());
    matmul_forward_cpu(mlp_out.data(), fch_gelu.data(), w.fcprojw, w.fcprojb, BT, 4 * C, C, (float*)nullptr);

    // cut: each rank its part; the row-parallel outputs summed over the ranks,
    // the bias added by rank 0 only
    const int Cl = C / t, NHl = NH / t;
    std::vector<float> att_sum((size_t)BT * C, 0.0f), mlp_sum((size_t)BT * C, 0.0f);
    for (int p = 0; p < t; p++) {
        std::vector<float> part(local.unit_spec(u).numel);
        local.tp_slice_unit(p, u, unit.data(), part.data());
        LayerTensors<const float> lw = layer_tensors(local, (const float*)part.data());
        std::vector<float> qkv_p((size_t)BT * 3 * Cl), atty_p((size_t)BT * Cl), lse_p((size_t)NHl * BT);
        std::vector<float> out_p((size_t)BT * C), fch_p((size_t)BT * 4 * Cl), gelu_p((size_t)BT * 4 * Cl);
        matmul_forward_cpu(qkv_p.data(), x.data(), lw.qkvw, lw.qkvb, BT, C, 3 * Cl, (float*)nullptr);
        attention_forward_cpu(atty_p.data(), lse_p.data(), qkv_p.data(), B, T_, Cl, NHl);
        matmul_forward_cpu(out_p.data(), atty_p.data(), lw.attprojw, p == 0 ? lw.attprojb : nullptr, BT, Cl, C,
                           (float*)nullptr);
        for (size_t i = 0; i < out_p.size(); i++) att_sum[i] += out_p[i];
        matmul_forward_cpu(gelu_p.data(), x.data(), lw.fcw, lw.fcb, BT, C, 4 * Cl, fch_p.data());
        matmul_forward_cpu(out_p.data(), gelu_p.data(), lw.fcprojw, p == 0 ? lw.fcprojb : nullptr, BT, 4 * Cl, C,
                           (float*)nullptr);
        for (size_t i = 0; i < out_p.size(); i++) mlp_sum[i] += out_p[i];
        // the column-parallel outputs are the whole run's columns of this rank's heads / features
        size_t bad = 0;
        for (int r = 0; r < BT; r++)
            for (int j = 0; j < Cl; j++) bad += atty_p[(size_t)r * Cl + j] != atty[(size_t)r * C + p * Cl + j];
        EXPECT(bad == 0, "t=%d p=%d: %zu attention outputs differ from the whole run's heads", t, p, bad);
    }
    double da = max_rel_diff(att_sum, att_out), dm = max_rel_diff(mlp_sum, mlp_out);
    EXPECT(da < 1e-5 && dm < 1e-5, "t=%d: row-parallel sums differ from the whole block by %.3g (attn), %.3g (mlp)",
           t, da, dm);
}

int main() {
    // generic shapes: rows in groups, columns, replicated; t dividing them
    TpTensorShape qkv_like{12, 5, TpSplit::Rows, 3}, rows{8, 3, TpSplit::Rows, 1}, cols{3, 8, TpSplit::Cols, 1};
    TpTensorShape vec{12, 1, TpSplit::Rows, 3}, rep{7, 3, TpSplit::Replicated, 1};
    for (int t : {1, 2, 4}) {
        check_shape(qkv_like, t, "qkv-like");
        check_shape(rows, t, "rows");
        check_shape(cols, t, "cols");
        check_shape(vec, t, "grouped vector");
        check_shape(rep, t, "replicated");
        EXPECT(tp_shape_error(qkv_like, t, "x").empty(), "t=%d divides 12 rows in 3 groups", t);
    }
    EXPECT(!tp_shape_error(qkv_like, 3, "x").empty(), "4 rows per group do not divide by 3");
    EXPECT(!tp_shape_error(cols, 3, "x").empty(), "8 columns do not divide by 3");
    EXPECT(tp_shape_error(rep, 3, "x").empty(), "replicated tensors divide by anything");

    // GPT-2 layouts
    for (int t : {1, 2, 4}) {
        check_layout(TINY_T64, t);
        check_layout("L=3,H=4,C=72,V=1001,T=50", t);
    }
    check_layout("L=1,H=6,C=48,V=300,T=16", 3);

    // the grid: tensor ranks adjacent
    for (int t : {1, 2, 4})
        for (int d : {1, 2}) {
            TpGrid g(t * d, t);
            EXPECT(g.t == t && g.d == d && g.world() == t * d, "grid %dx%d", t, d);
            for (int r = 0; r < t * d; r++) {
                EXPECT(g.rank_of(g.dp_rank(r), g.tp_rank(r)) == r, "grid round trip of rank %d", r);
                EXPECT(g.tp_rank(r) == r % t && g.dp_rank(r) == r / t, "rank %d = dp*t + tp", r);
            }
            EXPECT(tp_grid_error(t * d, t).empty(), "world %d, t=%d", t * d, t);
        }
    EXPECT(tp_grid_error(6, 4).find("not a multiple of --tp 4") != std::string::npos, "world 6, t=4: '%s'",
           tp_grid_error(6, 4).c_str());
    EXPECT(!tp_grid_error(4, 0).empty(), "t=0 refused");

    // the refusals, each naming what does not divide
    GPT2Config d12 = gpt2_config_from_descriptor("d12");
    for (int t : {1, 2, 3, 4, 6, 12}) EXPECT(tensor_parallel_error(d12, t).empty(), "d12 at t=%d", t);
    EXPECT(tensor_parallel_error(d12, 5).find("12 attention heads") != std::string::npos, "heads: '%s'",
           tensor_parallel_error(d12, 5).c_str());
    EXPECT(tensor_parallel_error(d12, 8).find("heads") != std::string::npos, "d12 at t=8");
    GPT2Config odd_vocab = gpt2_config_from_descriptor("L=1,H=3,C=48,V=100,T=16");  // Vp = 128
    EXPECT(tensor_parallel_error(odd_vocab, 3).find("padded vocabulary of 128") != std::string::npos,
           "vocab: '%s'", tensor_parallel_error(odd_vocab, 3).c_str());

    // the cuts fit the kernels
    for (int t : {1, 2, 4}) check_block_equivalence(t);
    return test_summary("tp_plan");
}
