// Sharded checkpoints. A checkpoint of step s is a directory
//
//     <output>/checkpoint_<s>/
//         model.bin                llm.c model file of the full model (rank 0; compute-dtype
//                                  parameters, each unit assembled from its tensor group)
//         state.bin                step, optimizer step, loss scaler, data position (rank 0)
//         optim_rank<r>.bin        rank r's slices of fp32 master, Adam m and v (every rank)
//         MANIFEST                 the run's identity and every file's size and checksum
//                                  (zero/engine/checkpoint_manifest.h)
//
// Written whole or not at all, verified before a resume loads a byte, and
// re-sliced through the full tensors on any other grid or stage (zero/README.md,
// "Checkpoints"; checkpoint_dir.h names and publishes, checkpoint_reslice.h maps).
// Sequence parallelism holds no state and is not recorded; a pipeline's last
// stage also writes its copy of the embeddings, never read back.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "data/dataloader.h"
#include "zero/base/common.h"
#include "zero/engine/checkpoint_dir.h"
#include "zero/engine/checkpoint_manifest.h"
#include "zero/layout/gpt2_config.h"
#include "zero/engine/loss_scaler.h"
#include "zero/layout/checkpoint_reslice.h"
#include "zero/layout/model_file.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"
#include "zero/engine/zero_engine.h"

constexpr uint32_t CKPT_STATE_MAGIC = 0x5a45524f;  // "ZERO"
constexpr uint32_t CKPT_OPTIM_MAGIC = 0x5a4f5054;  // "ZOPT"
constexpr uint32_t CKPT_VERSION = 2;  // 2: the header records the tensor-parallel degree

// What identifies the model and run a checkpoint belongs to, in both file kinds.
struct CkptHeader {
    uint32_t magic, version;
    int32_t step, world, stage, rank;
    int32_t max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels;
    int32_t tp;            // tensor-parallel degree t of the grid (world = d x t x pp); rank = (s*d + dp)*t + tp
    int32_t pp;            // pipeline stages (0 in files written before there were any: one)
    uint64_t shard_numel;  // elements per array in an optim file
};

inline CkptHeader make_header(uint32_t magic, const GPT2Config& c, int step, int world, int stage, int rank,
                              size_t shard_numel, int tp = 1, int pp = 1) {
    return {.magic = magic, .version = CKPT_VERSION, .step = step, .world = world, .stage = stage, .rank = rank,
            .max_seq_len = c.max_seq_len, .vocab_size = c.vocab_size, .padded_vocab_size = c.padded_vocab_size,
            .num_layers = c.num_layers, .num_heads = c.num_heads, .channels = c.channels, .tp = tp, .pp = pp,
            .shard_numel = shard_numel};
}

inline int header_pp(const CkptHeader& h) { return h.pp == 0 ? 1 : h.pp; }

inline GPT2Config header_config(const CkptHeader& h) {
    return {.max_seq_len = h.max_seq_len, .vocab_size = h.vocab_size, .padded_vocab_size = h.padded_vocab_size,
            .num_layers = h.num_layers, .num_heads = h.num_heads, .channels = h.channels};
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
    CHECK(h.tp >= 1 && h.pp >= 0 && h.world >= 1 && h.world % (h.tp * header_pp(h)) == 0,
          "%s: a grid of %d ranks with --tp %d and %d pipeline stage(s) is not one of ours", path.c_str(), h.world, h.tp,
          header_pp(h));
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

// Writes this rank's slices of master, m and v of an engine with the given
// data plan and stage, a unit's slice at a time: read(a, i, n, dst) puts n
// elements of array a (0 master, 1 m, 2 v) from optimizer index i into dst,
// so that no copy of the whole shard is held. h.rank = (s*d + dp)*h.tp + tp.
template <typename Read>
void write_optim_file_from(const std::string& dir, const CkptHeader& h, const ShardPlan& plan, int stage, Read read) {
    const int dp = h.rank / h.tp % (h.world / (h.tp * header_pp(h)));  // the slice: this rank's place in its data group
    AtomicFile f(optim_file(dir, h.rank));
    f.write(&h, sizeof(h));
    std::vector<float> slice;
    for (int a = 0; a < 3; a++)
        for (int u = 0; u < plan.num_units(); u++) {
            slice.resize(plan.slice_numel(u));
            read(a, optimizer_index(plan, stage, dp, u, (size_t)dp * plan.slice_numel(u)), slice.size(), slice.data());
            f.write(slice.data(), slice.size() * sizeof(float));
        }
    f.commit();
}
// Gives the master/m/v (for `plan` and `stage`) of data rank `dp` and tensor
// rank `tp` of the grid of `layout` (its t and pipeline stage) from a
// checkpoint written by a grid of `old_world` ranks, `old_tp` per tensor group,
// in the pipeline stages `old_pipeline` (none: one), whatever ZeRO stage they
// ran, a unit's real elements at a time: write(a, i, n, src) takes n elements
// of array a (0 master, 1 m, 2 v) for optimizer index i.
template <typename Write>
void read_optim_files_to(const std::string& dir, const ParamLayout& layout, int old_world, int old_tp,
                         const PipelinePlan& old_pipeline, const ShardPlan& plan, int stage, int dp, int tp,
                         Write write) {
    const int old_pp = std::max(1, old_pipeline.stages());
    CHECK(old_tp >= 1 && old_world % (old_tp * old_pp) == 0,
          "checkpoint %s: %d ranks do not make a grid with --tp %d and %d pipeline stage(s)", dir.c_str(), old_world,
          old_tp, old_pp);
    const int old_dp = old_world / (old_tp * old_pp);
    std::vector<ParamLayout> old_layouts;  // per old pipeline stage, with its data plan
    std::vector<ShardPlan> old_plans;
    for (int s = 0; s < old_pp; s++) {
        old_layouts.emplace_back(layout.cfg, old_tp, old_pp > 1 ? old_pipeline.range(s) : StageRange{});
        old_plans.emplace_back(old_layouts[s].unit_specs(), old_dp, plan.align);
    }
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
        const ShardPlan& old = old_plans[k / (old_dp * old_tp)];
        CHECK(h.rank == k && h.world == old_world && h.tp == old_tp && header_pp(h) == old_pp &&
                  h.shard_numel == old.shard_numel,
              "%s does not belong with the other files of %s", paths[k].c_str(), dir.c_str());
        size_t expect = sizeof(h) + 3 * old.shard_numel * sizeof(float);
        CHECK(file_size(files[k]) == expect, "%s is truncated: %zu bytes, expected %zu", paths[k].c_str(),
              file_size(files[k]), expect);
    }
    std::vector<float> got;  // (3, hi - lo): one unit's
    for (int u = 0; u < plan.num_units(); u++) {
        // the real elements of unit u this rank keeps under its own plan
        size_t lo = stage == 0 ? 0 : (size_t)dp * plan.slice_numel(u);
        size_t hi = std::min(stage == 0 ? plan.padded[u] : lo + plan.slice_numel(u), plan.units[u].numel);
        if (lo >= hi) continue;
        got.assign(3 * (hi - lo), 0.0f);
        // where the whole model's unit lived in the old grid: its stage, its number there
        const int g = layout.global_unit(u), os = old_pipeline.stage_of_unit(g, layout.cfg.num_layers);
        const ShardPlan& old = old_plans[os];
        for (const ResliceRun& r : reslice_runs(old_layouts[os], old, old_layouts[os].local_unit(g),
                                                os * old_dp * old_tp, layout, tp, u, lo, hi))
            for (int arr = 0; arr < 3; arr++) {
                size_t at = sizeof(CkptHeader) + ((size_t)arr * old.shard_numel + r.offset) * sizeof(float);
                seek_to(files[r.file], at, paths[r.file]);
                read_exact(files[r.file], got.data() + arr * (hi - lo) + (r.at - lo), r.n * sizeof(float),
                           paths[r.file]);
            }
        for (int arr = 0; arr < 3; arr++)
            write(arr, optimizer_index(plan, stage, dp, u, lo), hi - lo, (const float*)got.data() + arr * (hi - lo));
    }
    for (FILE* f : files) fclose(f);
}
// A checkpoint's MANIFEST; fails naming the directory if it is absent or bad.
inline CheckpointManifest checkpoint_manifest(const std::string& dir) {
    CheckpointManifest manifest;
    std::string why;
    CHECK(read_manifest(dir, manifest, why), "%s: %s", dir.c_str(), why.c_str());
    return manifest;
}

// One plain fp32 llm.c model file (<dir>/model_fp32.bin) from the fp32 master
// weights of a sharded checkpoint, whatever world size and stage wrote it.
inline std::string consolidate_checkpoint(const std::string& dir) {
    CkptHeader h = read_checkpoint_header(dir);
    ParamLayout layout(header_config(h));  // the full model: t = 1
    ShardPlan whole(layout.unit_specs(), 1, SHARD_ALIGN);
    std::vector<float> w(whole.full_numel);  // the masters (m and v are not kept)
    // the pipeline stages that wrote it, from its MANIFEST (none: one)
    PipelinePlan pipeline = header_pp(h) > 1 ? PipelinePlan{checkpoint_manifest(dir).id.pp_layers} : PipelinePlan{};
    CHECK(std::max(1, pipeline.stages()) == header_pp(h), "%s: its MANIFEST and state.bin disagree on the pipeline",
          dir.c_str());
    read_optim_files_to(dir, layout, h.world, h.tp, pipeline, whole, 0, 0, 0,
                        [&](int a, size_t i, size_t n, const float* src) {
                            if (a == 0) std::copy(src, src + n, w.data() + i);
                        });
    std::string out = dir + "/model_fp32.bin";
    ModelFileWriter<float> writer(out, layout);
    for (int u = 0; u < layout.num_units(); u++) writer.write_unit(u, w.data() + whole.full_offset[u]);
    writer.commit();
    printf("wrote %s from the %d optimizer shard(s) of step %d", out.c_str(), h.world, h.step);
    if (header_pp(h) > 1 || h.tp > 1) {
        std::string stages = header_pp(h) > 1 ? std::to_string(header_pp(h)) + " pipeline stages x " : "";
        printf(" (a grid of %s--tp %d x %d data-parallel ranks)", stages.c_str(), h.tp,
               h.world / (h.tp * header_pp(h)));
    }
    printf("\n");
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

// Unit u's full compute-dtype parameters on the host of `rank0` (`out`, the
// full model's unit): the data group gathers the t-local unit as for any
// export, and with tensor parallelism the tensor group all-gathers its t parts,
// which rank0 places into the full unit. Every rank of the stage calls this together.
template <typename T>
void export_full_unit(ZeroEngine<T>& zero, int u, bool rank0, T* gather_buffer, std::vector<T>& local,
                      std::vector<T>& out) {
    const ParamLayout& layout = zero.layout;
    const size_t padded = zero.plan.padded[u];
    const T* unit = zero.acquire_params_for_export(u);
    if (layout.tp > 1) {
        // (t, padded) on the device: tensor rank p's part at p*padded
        zero.tensor->all_gather(unit, gather_buffer, padded, dtype_of<T>::value, zero.ctx.stream);
        stream_sync(zero.ctx.stream);
    }
    if (rank0) {
        local.resize(padded * layout.tp);
        zero.copy_to_host(local.data(), layout.tp > 1 ? gather_buffer : unit, local.size() * sizeof(T));
        if (layout.tp == 1) {
            out = local;
        } else {
            out.assign(layout.whole_tensors().unit_spec(u).numel, T{});
            for (int p = 0; p < layout.tp; p++) layout.tp_place_unit(p, u, local.data() + (size_t)p * padded, out.data());
        }
    }
    zero.release_params_after_export(u);
}

// Writes checkpoint_<rs.step> (every rank of `world` calls this together: with
// tensor or pipeline parallelism the engine's comm is only the data group);
// returns its directory. `pipeline`: the run's stages (none: one).
template <typename T>
std::string save_checkpoint(const std::string& output_dir, const RunState& rs, ZeroEngine<T>& zero, Comm& world,
                            DType dtype, unsigned long long seed, long long tokens_per_step,
                            const PipelinePlan& pipeline = PipelinePlan{}) {
    const ParamLayout& layout = zero.layout;
    const ParamLayout whole(layout.cfg, 1);  // model.bin is of the full model whatever t
    const bool rank0 = world.rank == 0;
    zero.apply_pending_update();  // a delayed update's AdamW into master, m, v and the parameters
    const std::string final_dir = checkpoint_dir(output_dir, rs.step);
    const std::string dir = checkpoint_staging_dir(output_dir, rs.step);
    if (rank0) {
        remove_tree(dir);  // what a killed save of this step left
        make_dir(dir);
    }
    world.barrier();

    // model.bin: the compute-dtype parameters (bf16 -> version 5, else fp32 version 3);
    // stage 3 gathers each unit for it, tensor parallelism its t parts
    std::unique_ptr<ModelFileWriter<float>> w32;
    std::unique_ptr<ModelFileWriter<bf16>> w16;
    if (rank0 && dtype == DType::BF16) w16 = std::make_unique<ModelFileWriter<bf16>>(dir + "/model.bin", whole);
    else if (rank0) w32 = std::make_unique<ModelFileWriter<float>>(dir + "/model.bin", whole);
    T* gather_buffer = nullptr;  // (t, largest padded unit): outside any step, so not from the step's accountant
    if (layout.tp > 1) {
        size_t largest = *std::max_element(zero.plan.padded.begin(), zero.plan.padded.end());
        gather_buffer = (T*)device_malloc(largest * layout.tp * sizeof(T));
    }
    // with pipeline stages each unit comes from the stage holding it (the
    // embeddings from the first), through its (dp 0, tp 0) rank, the stage's
    // root, to rank 0 along their pipeline group
    const bool stage_root = zero.rank == 0 && zero.tp_rank == 0;
    const int my_stage = zero.pipe ? zero.pipe->rank : 0;
    T* unit_buffer = nullptr;  // (largest whole unit): a unit on its way to rank 0, outside the accountant
    if (zero.pipe && stage_root) {
        size_t largest = 0;
        for (int g = 0; g < whole.num_units(); g++) largest = std::max(largest, whole.unit_spec(g).numel);
        unit_buffer = (T*)device_malloc(largest * sizeof(T));
    }
    std::vector<T> local, full;
    for (int g = 0; g < whole.num_units(); g++) {
        const int owner = pipeline.stage_of_unit(g, layout.cfg.num_layers);
        if (owner == my_stage) export_full_unit(zero, layout.local_unit(g), stage_root, gather_buffer, local, full);
        if (owner != 0 && unit_buffer) {
            size_t bytes = whole.unit_spec(g).numel * sizeof(T);
            if (owner == my_stage) {
                zero.copy_to_device(unit_buffer, full.data(), bytes);
                zero.pipe->send(unit_buffer, bytes, 0, zero.ctx.stream);
            } else if (rank0) {
                full.resize(whole.unit_spec(g).numel);
                zero.pipe->recv(unit_buffer, bytes, owner, zero.ctx.stream);
                zero.copy_to_host(full.data(), unit_buffer, bytes);
            }
        }
        if (!rank0) continue;
        if (w16) {
            w16->write_unit(g, (const bf16*)full.data());
        } else {
            std::vector<float> f(full.size());
            for (size_t i = 0; i < full.size(); i++) f[i] = to_float(full[i]);
            w32->write_unit(g, f.data());
        }
    }
    if (unit_buffer) {
        stream_sync(zero.ctx.stream);
        device_free(unit_buffer);
    }
    if (gather_buffer) device_free(gather_buffer);
    if (w16) w16->commit();
    if (w32) w32->commit();

    // optim_rank<r>.bin: every rank of the grid its slices of master, m, v, a unit at a time
    const int pp = std::max(1, pipeline.stages());
    write_optim_file_from(dir,
                          make_header(CKPT_OPTIM_MAGIC, layout.cfg, rs.step, world.world, zero.stage, world.rank,
                                      zero.plan.shard_numel, layout.tp, pp),
                          zero.plan, zero.stage,
                          [&](int a, size_t i, size_t n, float* dst) { zero.read_state_range(a, i, n, dst); });
    write_checksum_note(dir, world.rank);
    if (rank0)
        write_state_file(dir,
                         make_header(CKPT_STATE_MAGIC, layout.cfg, rs.step, world.world, zero.stage, 0, 0, layout.tp, pp),
                         rs);
    world.barrier();
    if (rank0)  // only now is the checkpoint complete
        publish_checkpoint(dir, final_dir,
                           {.step = rs.step, .shape = layout.cfg, .seed = seed, .world = world.world, .tp = layout.tp,
                            .stage = zero.stage, .pp_layers = pp > 1 ? pipeline.layers : std::vector<int>{},
                            .precision = dtype_name(dtype), .tokens_per_step = tokens_per_step});
    return final_dir;
}

// Loads the newest checkpoint in output_dir that verifies (rank 0 of `world`
// chooses, every rank loads it, whatever grid and stage wrote it) into the
// engine and rs; returns its directory, or "" if there is none. A checkpoint of
// another run (another model, another seed) is an error: resuming it would mix
// two runs.
template <typename T>
std::string resume_checkpoint(const std::string& output_dir, ZeroEngine<T>& zero, Comm& world, RunState& rs,
                              unsigned long long seed) {
    double chosen = world.rank == 0 ? (double)select_checkpoint(output_dir) : 0.0;
    int found = (int)world.sum_scalar(chosen);
    if (found < 0) return "";
    std::string dir = checkpoint_dir(output_dir, found);
    const CheckpointManifest manifest = checkpoint_manifest(dir);
    CHECK(manifest.id.seed == seed,
          "%s is a checkpoint of a run with --seed %llu, this run has --seed %llu: pass --seed %llu to continue it, "
          "or --overwrite 1 without -y 1 to start afresh",
          dir.c_str(), manifest.id.seed, seed, manifest.id.seed);
    CkptHeader h = read_state_file(dir, zero.layout.cfg, rs);
    const PipelinePlan old_pipeline{manifest.id.pp_layers};
    CHECK(manifest.id.pp() == header_pp(h), "%s: its MANIFEST and state.bin disagree on the pipeline", dir.c_str());
    // a unit at a time: no copy of the rank's whole states beside them
    read_optim_files_to(dir, zero.layout, h.world, h.tp, old_pipeline, zero.plan, zero.stage, zero.rank, zero.tp_rank,
                        [&](int a, size_t i, size_t n, const float* src) { zero.write_state_range(a, i, n, src); });
    zero.adam_t = rs.adam_t;
    zero.refresh_params_from_master();
    return dir;
}
