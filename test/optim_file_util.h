// The tests' writer and reader of a checkpoint's optimizer files from and into
// host copies of the three arrays (master, m, v), through the trainer's own
// unit-by-unit writer and reader (zero/engine/checkpoint.h).
#pragma once

#include <algorithm>
#include <string>

#include "zero/engine/checkpoint.h"

inline void write_optim_file(const std::string& dir, const CkptHeader& h, const ShardPlan& plan, int stage,
                             const float* const arrays[3]) {
    write_optim_file_from(dir, h, plan, stage, [&](int a, size_t i, size_t n, float* dst) {
        std::copy(arrays[a] + i, arrays[a] + i + n, dst);
    });
}

// The trainer's unit-by-unit reader of a checkpoint's optimizer files, into
// host arrays (zero where no real element lands).
inline void read_optim_files(const std::string& dir, const ParamLayout& layout, int old_world, int old_tp,
                             const PipelinePlan& old_pipeline, const ShardPlan& plan, int stage, int dp, int tp,
                             float* const arrays[3]) {
    read_optim_files_to(dir, layout, old_world, old_tp, old_pipeline, plan, stage, dp, tp,
                        [&](int a, size_t i, size_t n, const float* src) { std::copy(src, src + n, arrays[a] + i); });
}
