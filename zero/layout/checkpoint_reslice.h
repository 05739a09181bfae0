// Where a resuming rank finds its optimizer state in a checkpoint written by
// another grid. Pure and host-only, like the shard plan and the tensor-parallel
// plan it composes.
//
// File dp*t + tp of a t x d grid holds slice dp of each t-local unit. An
// element of the new rank's unit is an element of a full tensor
// (tp_for_each_run of the new layout), held by old tensor rank p at some local
// offset (tp_locate; replicated tensors from p = 0), in old data rank k's slice
// (the old shard plan). Sequence parallelism is no part of a checkpoint's grid;
// a whole-model unit is read from the old stage that held it (zero/README.md,
// "Checkpoints").
#pragma once

#include <algorithm>
#include <vector>

#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"
#include "zero/layout/tp_plan.h"

// n consecutive elements of the new rank's unit, from `at` on, are elements
// `offset`.. of each array (master, m, v) of old optimizer file `file`
// (counted from the first array element, after the file's header).
struct ResliceRun {
    size_t at;
    int file;
    size_t offset;
    size_t n;
};

// The runs that fill elements [lo, hi) of unit u of tensor-parallel rank
// `new_tp` under `new_layout` (its t'), from the files of a checkpoint of the
// old grid: `old_layout` (the old t) and `old_plan` (the old data plan of that
// t-local layout, old d ranks), where the same unit is unit old_u, in files
// file0 + k*t + p (file0: the first file of its pipeline stage). Elements in no
// tensor (alignment gaps, unit padding) are in no run: they stay zero. Runs
// come in order of `at`, adjacent ones merged.
inline std::vector<ResliceRun> reslice_runs(const ParamLayout& old_layout, const ShardPlan& old_plan, int old_u,
                                            int file0, const ParamLayout& new_layout, int new_tp, int u, size_t lo,
                                            size_t hi) {
    std::vector<ResliceRun> runs;
    auto emit = [&](size_t at, int file, size_t offset, size_t n) {
        if (!runs.empty()) {
            ResliceRun& b = runs.back();
            if (b.file == file && b.at + b.n == at && b.offset + b.n == offset) {
                b.n += n;
                return;
            }
        }
        runs.push_back({at, file, offset, n});
    };
    const int old_t = old_layout.tp;
    const size_t slice = old_plan.slice_numel(old_u);
    for (const TensorSpec& ts : new_layout.unit_spec(u).tensors) {
        const TpTensorShape new_shape = new_layout.tp_shape(ts.id), old_shape = old_layout.tp_shape(ts.id);
        const size_t old_base = old_layout.offset_in_unit(ts.id);
        tp_for_each_run(new_shape, new_layout.tp, new_tp, [&](size_t local, size_t full, size_t n) {
            // this run of the new part, clipped to [lo, hi)
            size_t a = std::max(lo, ts.offset_in_unit + local), b = std::min(hi, ts.offset_in_unit + local + n);
            for (size_t at = a; at < b;) {
                size_t f = full + (at - ts.offset_in_unit - local);  // in the full tensor
                TpLocation where = tp_locate(old_shape, old_t, f);
                size_t q = old_base + where.local;  // in the old t-local unit
                size_t k = q / slice;               // the old data rank whose slice holds it
                size_t m = std::min({b - at, where.run, (k + 1) * slice - q});
                emit(at, file0 + (int)k * old_t + where.tp, old_plan.shard_offset[old_u] + (q - k * slice), m);
                at += m;
            }
        });
    }
    return runs;
}
