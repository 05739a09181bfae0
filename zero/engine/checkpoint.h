// Sharded checkpoints. A checkpoint of step s is a directory
//
//     <output>/checkpoint_<s>/
//         model.bin                llm.c model file (rank 0; compute-dtype parameters)
//         state.bin                step, optimizer step, loss scaler, data position (rank 0)
//         optim_rank<r>.bin        rank r's slices of fp32 master, Adam m and v (every rank)
//         DONE                     written last, once every file above is complete
//
// Every file is written to a temporary name and renamed; a directory without
// DONE is ignored by resume. Rank r's file holds, unit by unit, rank r's slice
// of that unit under the plan of the world that wrote it, whatever its stage
// (a stage-0 rank writes the slice of its full copy), so a checkpoint is the
// same set of bytes at every stage. Loading re-slices: each element of the
// ranges the new rank needs is read from the old rank whose slice held it, so
// a run can resume at another world size or stage.
#pragma once

#include <dirent.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "zero/base/common.h"
#include "zero/layout/gpt2_config.h"
#include "zero/engine/loss_scaler.h"
#include "zero/layout/model_file.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"
#include "zero/engine/zero_engine.h"

constexpr uint32_t CKPT_STATE_MAGIC = 0x5a45524f;  // "ZERO"
constexpr uint32_t CKPT_OPTIM_MAGIC = 0x5a4f5054;  // "ZOPT"
constexpr uint32_t CKPT_VERSION = 1;

inline std::string checkpoint_dir(const std::string& output_dir, int step) {
    char name[64];
    snprintf(name, sizeof(name), "/checkpoint_%08d", step);
    return output_dir + name;
}
inline std::string optim_file(const std::string& dir, int rank) {
    char name[64];
    snprintf(name, sizeof(name), "/optim_rank%05d.bin", rank);
    return dir + name;
}

// The highest step with a complete checkpoint in output_dir, or -1.
inline int latest_checkpoint(const std::string& output_dir) {
    int best = -1;
    DIR* d = opendir(output_dir.c_str());
    if (!d) return -1;
    while (dirent* e = readdir(d)) {
        int step;
        char tail;
        if (sscanf(e->d_name, "checkpoint_%d%c", &step, &tail) == 1 &&
            file_exists(checkpoint_dir(output_dir, step) + "/DONE"))
            best = std::max(best, step);
    }
    closedir(d);
    return best;
}

// What identifies the model and run a checkpoint belongs to, in both file kinds.
struct CkptHeader {
    uint32_t magic, version;
    int32_t step, world, stage, rank;
    int32_t max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
    uint64_t shard_numel;  // elements per array in an optim file
};

inline CkptHeader make_header(uint32_t magic, const GPT2Config& c, int step, int world, int stage, int rank,
                              size_t shard_numel) {
    CkptHeader h{};
    h.magic = magic;
    h.version = CKPT_VERSION;
    h.step = step;
    h.world = world;
    h.stage = stage;
    h.rank = rank;
    h.max_seq_len = c.max_seq_len;
    h.vocab_size = c.vocab_size;
    h.padded_vocab_size = c.padded_vocab_size;
    h.num_layers = c.num_layers;
    h.num_heads = c.num_heads;
    h.channels = c.channels;
    h.shard_numel = shard_numel;
    return h;
}

inline GPT2Config header_config(const CkptHeader& h) {
    GPT2Config c;
    c.max_seq_len = h.max_seq_len;
    c.vocab_size = h.vocab_size;
    c.padded_vocab_size = h.padded_vocab_size;
    c.num_layers = h.num_layers;
    c.num_heads = h.num_heads;
    c.channels = h.channels;
    return c;
}

// state.bin: the header, then the run state (a POD chosen by the trainer).
template <typename RunState>
void write_state_file(const std::string& dir, const CkptHeader& h, const RunState& s) {
    AtomicFile f(dir + "/state.bin");
    f.write(&h, sizeof(h));
    f.write(&s, sizeof(s));
    f.commit();
}

// The header of a checkpoint's state.bin (which model, which world wrote it).
inline CkptHeader read_checkpoint_header(const std::string& dir, FILE** keep_open = nullptr) {
    std::string path = dir + "/state.bin";
    CHECK(file_exists(path), "%s is not a complete checkpoint: it has no state.bin", dir.c_str());
    FILE* f = open_file(path, "rb");
    CkptHeader h;
    read_exact(f, &h, sizeof(h), path);
    CHECK(h.magic == CKPT_STATE_MAGIC && h.version == CKPT_VERSION, "%s is not a checkpoint state file of ours",
          path.c_str());
    validate_config(header_config(h), path);
    if (keep_open) *keep_open = f;
    else fclose(f);
    return h;
}

template <typename RunState>
CkptHeader read_state_file(const std::string& dir, const GPT2Config& expect, RunState& s) {
    std::string path = dir + "/state.bin";
    FILE* f = nullptr;
    CkptHeader h = read_checkpoint_header(dir, &f);
    CHECK(same_shape(header_config(h), expect), "checkpoint %s is of another model (%s), not %s", dir.c_str(),
          describe_config(header_config(h)).c_str(), describe_config(expect).c_str());
    read_exact(f, &s, sizeof(s), path);
    CHECK(file_size(f) == sizeof(h) + sizeof(s), "%s has trailing bytes: written by another version?", path.c_str());
    fclose(f);
    return h;
}

// Where rank r keeps unit u's optimizer values, for each stage: the offset of
// element `in_unit` (a position inside the unit) in its master/m/v arrays.
inline size_t optimizer_index(const ShardPlan& plan, int stage, int rank, int u, size_t in_unit) {
    if (stage == 0) return plan.full_offset[u] + in_unit;
    return plan.shard_offset[u] + (in_unit - (size_t)rank * plan.slice_numel(u));
}

// Writes this rank's slices of master, m and v (host copies of the optimizer
// arrays of an engine with the given plan and stage).
inline void write_optim_file(const std::string& dir, const CkptHeader& h, const ShardPlan& plan, int stage,
                             const float* const arrays[3]) {
    AtomicFile f(optim_file(dir, h.rank));
    f.write(&h, sizeof(h));
    for (int a = 0; a < 3; a++)
        for (int u = 0; u < plan.num_units(); u++) {
            size_t begin = (size_t)h.rank * plan.slice_numel(u);
            f.write(arrays[a] + optimizer_index(plan, stage, h.rank, u, begin), plan.slice_numel(u) * sizeof(float));
        }
    f.commit();
}

// Fills this rank's master/m/v arrays (host, for `plan` and `stage`) from a
// checkpoint written by `old_world` ranks, whatever stage they ran.
inline void read_optim_files(const std::string& dir, const ParamLayout& layout, int old_world, const ShardPlan& plan,
                             int stage, int rank, float* const arrays[3]) {
    ShardPlan old(layout.unit_specs(), old_world, plan.align);
    std::vector<FILE*> files(old_world);
    std::vector<std::string> paths(old_world);
    for (int k = 0; k < old_world; k++) {
        paths[k] = optim_file(dir, k);
        CHECK(file_exists(paths[k]), "checkpoint %s is missing %s (it was written by %d ranks)", dir.c_str(),
              paths[k].c_str(), old_world);
        files[k] = open_file(paths[k], "rb");
        CkptHeader h;
        read_exact(files[k], &h, sizeof(h), paths[k]);
        CHECK(h.magic == CKPT_OPTIM_MAGIC && h.version == CKPT_VERSION, "%s is not an optimizer shard of ours",
              paths[k].c_str());
        CHECK(same_shape(header_config(h), layout.cfg), "%s is of another model (%s)", paths[k].c_str(),
              describe_config(header_config(h)).c_str());
        CHECK(h.rank == k && h.world == old_world && h.shard_numel == old.shard_numel,
              "%s does not belong with the other files of %s", paths[k].c_str(), dir.c_str());
        size_t expect = sizeof(h) + 3 * old.shard_numel * sizeof(float);
        CHECK(file_size(files[k]) == expect, "%s is truncated: %zu bytes, expected %zu", paths[k].c_str(),
              file_size(files[k]), expect);
    }
    for (int u = 0; u < plan.num_units(); u++) {
        // the real elements of unit u this rank keeps under its own plan
        size_t lo = stage == 0 ? 0 : (size_t)rank * plan.slice_numel(u);
        size_t hi = std::min(stage == 0 ? plan.padded[u] : lo + plan.slice_numel(u), plan.units[u].numel);
        size_t s = old.slice_numel(u);
        for (int k = 0; k < old_world && lo < hi; k++) {
            size_t a = std::max(lo, k * s), b = std::min(hi, (k + 1) * s);
            if (a >= b) continue;
            for (int arr = 0; arr < 3; arr++) {
                size_t at = sizeof(CkptHeader) + ((size_t)arr * old.shard_numel + old.shard_offset[u] + (a - k * s)) * sizeof(float);
                seek_to(files[k], at, paths[k]);
                read_exact(files[k], arrays[arr] + optimizer_index(plan, stage, rank, u, a), (b - a) * sizeof(float),
                           paths[k]);
            }
        }
    }
    for (FILE* f : files) fclose(f);
}

inline void write_done_marker(const std::string& dir) {
    AtomicFile f(dir + "/DONE");
    f.write("done\n", 5);
    f.commit();
}

// One plain fp32 llm.c model file (<dir>/model_fp32.bin) from the fp32 master
// weights of a sharded checkpoint, whatever world size and stage wrote it.
inline std::string consolidate_checkpoint(const std::string& dir) {
    CkptHeader h = read_checkpoint_header(dir);
    ParamLayout layout(header_config(h));
    ShardPlan whole(layout.unit_specs(), 1, SHARD_ALIGN);
    std::vector<float> w(whole.full_numel), m(whole.full_numel), v(whole.full_numel);
    float* arrays[3] = {w.data(), m.data(), v.data()};
    read_optim_files(dir, layout, h.world, whole, 0, 0, arrays);
    std::string out = dir + "/model_fp32.bin";
    ModelFileWriter<float> writer(out, layout);
    for (int u = 0; u < layout.num_units(); u++) writer.write_unit(u, w.data() + whole.full_offset[u]);
    writer.commit();
    printf("wrote %s from the %d optimizer shard(s) of step %d\n", out.c_str(), h.world, h.step);
    return out;
}

// ----------------------------------------------------------------------------
// Saving and resuming a run's engine: what every rank calls.

// What state.bin keeps besides the model and the optimizer shards.
struct RunState {
    int32_t step;    // steps completed
    int32_t adam_t;  // optimizer steps taken (skipped ones excluded)
    LossScaler::State scaler;
    DataLoader::State loader;
};

// Writes checkpoint_<rs.step> (every rank calls this together); returns its directory.
template <typename T>
std::string save_checkpoint(const std::string& output_dir, const RunState& rs, ZeroEngine<T>& zero, DType dtype) {
    const ParamLayout& layout = zero.layout;
    const bool rank0 = zero.rank == 0;
    std::string dir = checkpoint_dir(output_dir, rs.step);
    if (rank0) make_dir(dir);
    zero.comm.barrier();

    // model.bin: the compute-dtype parameters (bf16 -> version 5, else fp32 version 3);
    // stage 3 gathers each unit for it
    std::unique_ptr<ModelFileWriter<float>> w32;
    std::unique_ptr<ModelFileWriter<bf16>> w16;
    if (rank0 && dtype == DType::BF16) w16 = std::make_unique<ModelFileWriter<bf16>>(dir + "/model.bin", layout);
    else if (rank0) w32 = std::make_unique<ModelFileWriter<float>>(dir + "/model.bin", layout);
    for (int u = 0; u < layout.num_units(); u++) {
        const T* unit = zero.acquire_params_for_export(u);
        if (rank0) {
            std::vector<T> host(zero.plan.padded[u]);
            zero.copy_to_host(host.data(), unit, host.size() * sizeof(T));
            if (w16) {
                w16->write_unit(u, (const bf16*)host.data());
            } else {
                std::vector<float> f(host.size());
                for (size_t i = 0; i < host.size(); i++) f[i] = to_float(host[i]);
                w32->write_unit(u, f.data());
            }
        }
        zero.release_params_after_export(u);
    }
    if (w16) w16->commit();
    if (w32) w32->commit();

    // optim_rank<r>.bin: every rank its slices of master, m, v
    size_t n = zero.optimizer_numel();
    std::vector<float> w(n), m(n), v(n);
    zero.copy_to_host(w.data(), zero.master_weights(), n * sizeof(float));
    zero.copy_to_host(m.data(), zero.adam_m_state(), n * sizeof(float));
    zero.copy_to_host(v.data(), zero.adam_v_state(), n * sizeof(float));
    const float* arrays[3] = {w.data(), m.data(), v.data()};
    write_optim_file(dir,
                     make_header(CKPT_OPTIM_MAGIC, layout.cfg, rs.step, zero.world, zero.stage, zero.rank,
                                 zero.plan.shard_numel),
                     zero.plan, zero.stage, arrays);
    if (rank0) write_state_file(dir, make_header(CKPT_STATE_MAGIC, layout.cfg, rs.step, zero.world, zero.stage, 0, 0), rs);
    zero.comm.barrier();
    if (rank0) write_done_marker(dir);  // only now is the checkpoint complete
    return dir;
}

// Loads the latest complete checkpoint in output_dir into the engine (whatever
// world size and stage wrote it) and rs; returns its directory, or "" if none.
template <typename T>
std::string resume_checkpoint(const std::string& output_dir, ZeroEngine<T>& zero, RunState& rs) {
    int found = latest_checkpoint(output_dir);
    if (found < 0) return "";
    std::string dir = checkpoint_dir(output_dir, found);
    CkptHeader h = read_state_file(dir, zero.layout.cfg, rs);
    size_t n = zero.optimizer_numel();
    std::vector<float> w(n), m(n), v(n);
    float* arrays[3] = {w.data(), m.data(), v.data()};
    read_optim_files(dir, zero.layout, h.world, zero.plan, zero.stage, zero.rank, arrays);
    zero.copy_to_device(zero.master_weights(), w.data(), n * sizeof(float));
    zero.copy_to_device(zero.adam_m_state(), m.data(), n * sizeof(float));
    zero.copy_to_device(zero.adam_v_state(), v.data(), n * sizeof(float));
    zero.adam_t = rs.adam_t;
    zero.refresh_params_from_master();
    return dir;
}
