// The tensor-parallel plan: which part of each tensor a tensor-parallel rank
// holds, and where the ranks sit in the 2-D grid beside the data-parallel ones.
// Pure and host-only, like the shard plan; it knows nothing about GPT-2 (the
// tensors' shapes and how each is cut come from zero/layout/param_layout.h).
//
// A tensor is a row-major (rows, cols) matrix (a vector is (n, 1)) cut one of
// three ways across the t ranks of a tensor group (Megatron's scheme):
//
//   Replicated  every rank holds all of it (layernorms, positions, the bias of
//               a row-parallel layer);
//   Rows        column-parallel layer: the output features (rows) are cut.
//               With g row groups (QKV: q, k and v) each group is cut on its
//               own, so rank p holds rows [p*R/(g t), (p+1)*R/(g t)) of every
//               group, the groups one after another: its heads' q, k and v;
//   Cols        row-parallel layer: the input features (columns) are cut; rank
//               p holds columns [p*K/t, (p+1)*K/t) of every row.
//
// The grid: rank = dp * t + tp, a tensor group's t ranks adjacent (one node,
// the fast links); zero/README.md, "Two slicings", for how ZeRO cuts the parts.
#pragma once

#include <cstddef>
#include <string>

enum class TpSplit : int { Replicated, Rows, Cols };

struct TpTensorShape {
    size_t rows = 0, cols = 1;
    TpSplit split = TpSplit::Replicated;
    int row_groups = 1;  // Rows only: groups cut independently (QKV: 3)
};

// Elements of a tensor that one of t ranks holds.
inline size_t tp_local_numel(const TpTensorShape& s, int t) {
    return s.split == TpSplit::Replicated ? s.rows * s.cols : s.rows * s.cols / t;
}

// Empty when t cuts the tensor evenly; otherwise why not (one line).
inline std::string tp_shape_error(const TpTensorShape& s, int t, const std::string& name) {
    if (t < 1) return "tensor-parallel degree must be at least 1 (got " + std::to_string(t) + ")";
    if (s.split == TpSplit::Rows && (s.rows % ((size_t)s.row_groups * t) != 0))
        return name + ": " + std::to_string(s.rows / s.row_groups) + " rows per group do not divide by --tp " +
               std::to_string(t);
    if (s.split == TpSplit::Cols && s.cols % t != 0)
        return name + ": " + std::to_string(s.cols) + " columns do not divide by --tp " + std::to_string(t);
    return "";
}

// Calls f(local_offset, full_offset, n) for each contiguous run of the part of
// the tensor that rank tp of t holds, in local (row-major) order. The runs tile
// [0, tp_local_numel) exactly.
template <typename F>
void tp_for_each_run(const TpTensorShape& s, int t, int tp, F f) {
    if (s.split == TpSplit::Replicated || t == 1) {
        f((size_t)0, (size_t)0, s.rows * s.cols);
    } else if (s.split == TpSplit::Rows) {
        size_t group_rows = s.rows / s.row_groups, mine = group_rows / t, local = 0;
        for (int g = 0; g < s.row_groups; g++) {
            size_t first_row = g * group_rows + (size_t)tp * mine;
            f(local, first_row * s.cols, mine * s.cols);
            local += mine * s.cols;
        }
    } else {
        size_t mine = s.cols / t;
        for (size_t r = 0; r < s.rows; r++) f(r * mine, r * s.cols + (size_t)tp * mine, mine);
    }
}

// Which rank of t holds element `full` (row-major) of the tensor, where in its
// part (`local`), and how many elements from there on stay consecutive on both
// sides (`run`). A replicated tensor is read from rank 0. The inverse of
// tp_for_each_run.
struct TpLocation {
    int tp;
    size_t local, run;
};
inline TpLocation tp_locate(const TpTensorShape& s, int t, size_t full) {
    if (s.split == TpSplit::Replicated || t == 1) return {0, full, s.rows * s.cols - full};
    size_t row = full / s.cols, col = full % s.cols;
    if (s.split == TpSplit::Rows) {
        size_t group_rows = s.rows / s.row_groups, mine = group_rows / t;
        size_t group = row / group_rows, in_group = row % group_rows;
        size_t p = in_group / mine;
        size_t local_row = group * mine + in_group % mine;
        return {(int)p, local_row * s.cols + col, ((p + 1) * mine - in_group) * s.cols - col};
    }
    size_t mine = s.cols / t, p = col / mine;
    return {(int)p, row * mine + col % mine, mine - col % mine};
}

// The 2-D grid of a run with world ranks, t of them per tensor group.
struct TpGrid {
    int t = 1, d = 1;  // tensor-parallel and data-parallel degrees
    TpGrid() = default;
    TpGrid(int world, int tp) : t(tp), d(tp >= 1 ? world / tp : 0) {}
    int world() const { return t * d; }
    int tp_rank(int rank) const { return rank % t; }
    int dp_rank(int rank) const { return rank / t; }
    int rank_of(int dp, int tp) const { return dp * t + tp; }
};

// Empty when `world` ranks make a t x d grid; otherwise one line saying why not.
inline std::string tp_grid_error(int world, int t) {
    if (t < 1) return "--tp must be at least 1 (got " + std::to_string(t) + ")";
    if (world % t != 0)
        return "world size " + std::to_string(world) + " is not a multiple of --tp " + std::to_string(t) +
               ": the ranks form a grid of tensor groups of t ranks";
    return "";
}
