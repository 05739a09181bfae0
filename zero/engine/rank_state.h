// What one rank keeps of the model: its compute-dtype parameters (the whole
// model at stages 0-2, its slices at stage 3), its fp32 master weights and
// Adam moments (all of them at stage 0, its slices otherwise), where each
// piece of them sits, and how they are filled -- from a seed, a model file, a
// checkpoint's masters. ZeroEngine (zero_engine.h) is built on it and decides
// what moves when (zero/README.md, "Units, slices, pieces"). With NVMe offload
// the states of the last units live on disk (disk_states.h) and are read and
// written only through read_state_range / write_state_range and the CPU
// AdamW's tiles.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "kernels/kernels.h"
#include "zero/base/memory.h"
#include "zero/base/rng.h"
#include "zero/comm/comm.h"
#include "zero/engine/offload.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"

template <typename T>
class RankState {
  public:
    // comm: the data group; off: where the fp32 states and (stage 3) the
    // parameter slices live (offload.h); grid_rank: the rank's number in the
    // whole grid, which names its states' file with NVMe offload.
    RankState(const ParamLayout& layout_, Comm& comm_, MemoryAccountant& mem_, const KernelCtx& ctx_, int stage_,
              uint64_t seed_, int tp_rank_, const OffloadPolicy& off, int grid_rank_)
        : layout(layout_), plan(layout_.unit_specs(), comm_.world, SHARD_ALIGN), comm(comm_), mem(mem_), ctx(ctx_),
          stage(stage_), sharded(sharded_at(stage_)), rank(comm_.rank), world(comm_.world),
          grid_rank(grid_rank_), seed(seed_), tp_rank(tp_rank_) {
        CHECK(stage >= 0 && stage <= 3, "ZeRO stage must be 0, 1, 2 or 3 (got %d)", stage);
        // stochastic rounding keys: an element's offset in the whole model's buffer
        ShardPlan whole(ParamLayout(layout.cfg, layout.tp).unit_specs(), comm_.world, SHARD_ALIGN);
        for (int u = 0; u < plan.num_units(); u++)
            key_shift.push_back(whole.full_offset[layout.global_unit(u)] - plan.full_offset[u]);
        pieces = sharded.states ? plan.pieces_of_rank(rank) : plan.pieces_full();
        const Arena states = off.on_cpu() ? Arena::Host : Arena::Device;
        const Arena params = off.params == ParamHome::Host ? Arena::Host : Arena::Device;
        if (!sharded.params) params_full = mem.allocate_array<T>(plan.full_numel, MemKind::Params, Arena::Device, "params", true);
        else params_shard = mem.allocate_array<T>(plan.shard_numel, MemKind::Params, params, "params_shard", true);
        if (off.states == StateHome::Disk) {
            split = plan.disk_split(off.disk_fraction, off.disk_tile_numel);
            disk = std::make_unique<DiskStates>(off.disk, grid_rank, split.tiles, mem);
        } else {
            split.begin = optimizer_numel();
        }
        const size_t kept = split.begin;  // the states in memory
        master = mem.allocate_array<float>(kept, MemKind::Optimizer, states, "master_fp32", true);
        adam_m = mem.allocate_array<float>(kept, MemKind::Optimizer, states, "adam_m", true);
        adam_v = mem.allocate_array<float>(kept, MemKind::Optimizer, states, "adam_v", true);
    }
    RankState(const RankState&) = delete;
    RankState& operator=(const RankState&) = delete;

    const ParamLayout& layout;
    const ShardPlan plan;
    Comm& comm;
    MemoryAccountant& mem;
    const KernelCtx ctx;
    const int stage;
    const Sharded sharded;         // the stage's choices (shard_plan.h)
    const int rank, world;         // in the data group
    const int grid_rank;           // in the whole dp x tp x pp grid, the launcher's order (pipeline_plan.h)
    const uint64_t seed;
    const int tp_rank;
    int adam_t = 0;  // optimizer steps taken (skipped steps do not count)

    // This rank's fp32 master, m and v (optimizer_numel() each, indexed by the
    // pieces' shard_offset; stage 0: the full offset) into host arrays (tests),
    // or a range of one of them to or from the host (checkpoints, a unit at a
    // time), wherever they live. Outside a step.
    size_t optimizer_numel() const { return sharded.states ? plan.shard_numel : plan.full_numel; }
    void read_states(float* w, float* m, float* v) {
        float* dst[3] = {w, m, v};
        for (int s = 0; s < 3; s++) read_state_range(s, 0, optimizer_numel(), dst[s]);
    }
    // n elements of state s (0 master, 1 m, 2 v) from optimizer index `at`
    void read_state_range(int s, size_t at, size_t n, float* dst) {
        const float* src[3] = {master, adam_m, adam_v};
        const size_t in_memory = at < split.begin ? std::min(n, split.begin - at) : 0;
        if (in_memory) copy_to_host(dst, src[s] + at, in_memory * sizeof(float));
        if (n > in_memory) disk->read(s, at + in_memory - split.begin, n - in_memory, dst + in_memory);
    }
    void write_state_range(int s, size_t at, size_t n, const float* src) {
        float* dst[3] = {master, adam_m, adam_v};
        const size_t in_memory = at < split.begin ? std::min(n, split.begin - at) : 0;
        if (in_memory) copy_to_device(dst[s] + at, src, in_memory * sizeof(float));
        if (n > in_memory) disk->write(s, at + in_memory - split.begin, n - in_memory, src + in_memory);
    }

    // fill(u, dst) writes the fp32 values of unit u's first plan.units[u].numel
    // elements (padding stays zero). From those the engine keeps what this rank
    // owns: the fp32 masters of its pieces and its compute-dtype copy.
    template <typename Fill>
    void load_parameters(Fill fill) {
        std::vector<float> unit_values;
        for (int u = 0; u < plan.num_units(); u++) {
            unit_values.assign(plan.padded[u], 0.0f);
            fill(u, unit_values.data());
            keep_unit(u, unit_values.data());
        }
        stream_sync(ctx.stream);
    }

    // GPT-2's initial values from a seed (ParamLayout::initial_unit).
    void init_parameters(uint64_t init_seed) {
        std::vector<float> scratch;
        load_parameters([&](int u, float* dst) { layout.initial_unit(u, init_seed, tp_rank, dst, scratch); });
    }

    // After loading master weights (checkpoint resume): rebuild the compute-dtype
    // copy exactly as the AdamW step that produced them wrote it.
    void refresh_params_from_master() {
        std::vector<float> read;  // the masters a chunk at a time, from memory or disk
        for (const ShardPiece& p : pieces)
            for (size_t b = 0; b < p.numel; b += 1 << 20) {
                read.resize(std::min<size_t>(1 << 20, p.numel - b));
                read_state_range(0, p.shard_offset + b, read.size(), read.data());
                write_rounded(own_params(p) + b, read.data(), read.size(), rounding_seed(adam_t), key(p) + b);
            }
        if (sharded.states && !sharded.params)  // (whole parameters, updated a slice per rank)
            for (int u = 0; u < plan.num_units(); u++) gather_full_params(u, ctx.stream);
        stream_sync(ctx.stream);
    }

    // The stochastic-rounding stream of optimizer step t.
    uint64_t rounding_seed(int t) const { return mix64(seed ^ (0x5eedull << 40) ^ (uint64_t)t); }

    // dst[i] = src[i] rounded to T with stream rs, keyed by position k + i (either
    // side on the device or the host), element by element: the same bits on any
    // number of threads. In fixed chunks, so that start-up and a resume hold no
    // model-sized copy in host memory beside the arenas.
    void write_rounded(T* dst, const float* src, size_t n, uint64_t rs, size_t k) {
        const size_t chunk = std::min<size_t>(n, 1 << 20);
        std::vector<float> in(chunk);
        std::vector<T> out(chunk);
        for (size_t b = 0; b < n; b += chunk) {
            const size_t m = std::min(chunk, n - b);
            copy_to_host(in.data(), src + b, m * sizeof(float));
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < m; i++) out[i] = round_param<T>(in[i], rs, k + b + i);
            copy_to_device(dst + b, out.data(), m * sizeof(T));
        }
    }

    // blocking copies of this rank (start-up, checkpoints): either side may be host memory
    void copy_to_host(void* dst, const void* src, size_t bytes) {
        device_copy(dst, src, bytes, ctx.stream);
        stream_sync(ctx.stream);
    }
    void copy_to_device(void* dst, const void* src, size_t bytes) { copy_to_host(dst, src, bytes); }

  protected:
    friend class HostOptimizer<T>;  // optimizer offload: the CPU AdamW updates these states on the host
    std::vector<ShardPiece> pieces;  // what this rank's optimizer updates
    std::vector<size_t> key_shift;   // (units): the whole model's full offset minus this plan's
    T* params_full = nullptr;        // stages 0-2: (full_numel)
    T* params_shard = nullptr;       // stage 3: (shard_numel), on the host with parameter offload
    float* master = nullptr;         // fp32 master, Adam m and v: (split.begin), host with offload
    float* adam_m = nullptr;
    float* adam_v = nullptr;
    ShardPlan::DiskSplit split;          // NVMe offload: [split.begin, optimizer_numel) on disk; else begin = all
    std::unique_ptr<DiskStates> disk;    // NVMe offload's files, or null

    // A piece's stochastic-rounding key: its offset in the whole model's buffer.
    size_t key(const ShardPiece& p) const { return p.full_offset + key_shift[p.unit]; }

    // Where this rank's compute-dtype copy of piece p lives.
    T* own_params(const ShardPiece& p) const {
        return sharded.params ? params_shard + p.shard_offset : params_full + p.full_offset;
    }

    // Stages 1-2: all-gather unit u's parameters in place (each rank has updated its slice).
    void gather_full_params(int u, Stream s) {
        at_unit(u);
        T* unit = params_full + plan.full_offset[u];
        size_t slice = plan.slice_numel(u);
        comm.all_gather(unit + rank * slice, unit, slice, dtype_of<T>::value, s);
    }

    // Keeps this rank's part of one unit given its full fp32 values.
    void keep_unit(int u, const float* values) {
        size_t F = plan.full_offset[u], P = plan.padded[u], slice = plan.slice_numel(u);
        // fp32 masters of what this rank updates, at their optimizer offsets (m and v start at zero: the
        // accountant's memory and the disk's file are made zeroed)
        if (!sharded.states) write_state_range(0, F, P, values);
        else write_state_range(0, plan.shard_offset[u], slice, values + rank * slice);
        // compute-dtype copy: the whole unit (stages 0-2) or this rank's slice (stage 3),
        // rounded as a step-0 AdamW would have written it
        size_t begin = sharded.params ? rank * slice : 0, n = sharded.params ? slice : P;
        T* dst = sharded.params ? params_shard + plan.shard_offset[u] : params_full + F;
        write_rounded(dst, values + begin, n, rounding_seed(0), F + key_shift[u] + begin);
    }
};
