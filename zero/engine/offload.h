// Optimizer offload (ZeRO-Offload): a rank's fp32 master weights and Adam
// moments in pinned host memory (or on disk, a tile at a time: ZeRO-Infinity's
// NVMe offload, disk_states.h), updated there by the CPU AdamW, with each
// unit's reduced gradient slice brought down and its new parameters sent up
// around it; and stage 3's parameter offload. The engine (zero_engine.h)
// calls it from its hooks and its step. Its modes are named, never encoded
// in null pointers; they, and why each path is shaped as it is: zero/README.md,
// "Offload".
#pragma once

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu/adamw_simd.h"
#include "kernels/kernels.h"
#include "zero/base/memory.h"
#include "zero/comm/comm.h"
#include "zero/engine/disk_states.h"
#include "zero/engine/host_tasks.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"

// Where a rank's fp32 master weights and Adam moments live: Disk is the
// NVMe offload, the CPU AdamW's states read from files a tile at a time
// (disk_states.h), a share of them (whole units) kept in host memory.
enum class StateHome { Device, Host, Disk };
// Stage 3: where the compute-dtype parameter slices live between their gathers.
enum class ParamHome { Device, Host };
// With the states on the host, where a step's gradient slices add up over its micro-steps.
enum class GradSums { Host, Device };

// What the run asked for: --offload_optimizer, --offload_param,
// --offload_grad_accum, --offload_delay_steps, --nvme_*.
struct OffloadPolicy {
    StateHome states = StateHome::Device;
    DiskConfig disk;                     // StateHome::Disk: the directory and its I/O
    double disk_fraction = 1;            // the states' share on disk (the last units), the rest in host memory
    size_t disk_tile_numel = 4u << 20;   // a tile: elements of each state the disk moves at a time
    bool on_cpu() const { return states != StateHome::Device; }  // the CPU AdamW updates the states
    ParamHome params = ParamHome::Device;
    GradSums sums = GradSums::Host;
    int delay_steps = 0;  // W > 0: ZeRO-Offload's delayed parameter update, after W steps
};

// How a step's gradient slices reach the CPU AdamW.
enum class GradsDown {
    AsReduced,        // each reduced slice goes down at once; later micro-steps' add on the host
    AtLastMicroStep,  // they add up in a device shard, which goes down at the last micro-step (delayed update)
    InStep,           // they add up in a device shard; the step sends each unit's down just ahead of its AdamW
};
// How the CPU AdamW's new compute-dtype parameters reach the device.
enum class ParamsUp {
    ThroughLanding,  // each unit through one of two host landing slices, uploaded as the next is updated
    FromHostCopy,    // the delayed update: into a host copy, uploaded unit by unit at the next step's end
    Gathered,        // parameter offload: the host slices are the parameters; stage 3 gathers from them
};

// AdamW's hyperparameters and the clip, as the run was told (optimizer_config()
// in zero/run/run_setup.h; the defaults live in zero/run/options.h only).
struct OptimizerConfig {
    float beta1 = 0, beta2 = 0, eps = 0;
    float weight_decay = 0;
    float grad_clip = 0;  // global-norm clip; <= 0 disables
    bool bias_correction = true;  // false: the moments as they are, not over 1 - beta^t (DeepSpeed's Adam option)
};

// Optimizer step t's AdamW arguments (the weight decay is set per piece).
inline AdamWStep adamw_step(const OptimizerConfig& oc, float lr, float grad_scale, int t, uint64_t rounding_seed) {
    const bool bc = oc.bias_correction;
    return {.lr = lr, .beta1 = oc.beta1, .beta2 = oc.beta2, .eps = oc.eps, .weight_decay = 0.0f, .grad_scale = grad_scale,
            .bias_correction1 = bc ? 1.0f - powf(oc.beta1, (float)t) : 1.0f,
            .bias_correction2 = bc ? 1.0f - powf(oc.beta2, (float)t) : 1.0f, .rounding_seed = rounding_seed};
}

// Where a step's host time went, in the order the step spends it
// (milliseconds of the rank's thread). device: waiting for backward and the
// gradients' copies down; host_adds: host tasks still running after that (the
// additions, and each unit's sums of squares for the norm); norm: adding
// those up; adamw: the CPU AdamW (the uploads overlap it). With a delayed
// update the step waits for the AdamW the step before queued (update_wait)
// and adamw_ms is how long that took on its own thread.
struct OffloadTimes {
    double device_ms = 0, host_adds_ms = 0, norm_ms = 0, adamw_ms = 0, update_wait_ms = 0;
    bool delayed = false;
};

template <typename T>
class RankState;

template <typename T>
class HostOptimizer {
  public:
    // rank: what the rank keeps (rank_state.h): the pieces its AdamW updates,
    // their rounding keys, the host states in host memory and on disk
    // (StateHome::Disk, from split.begin), stage 3's parameter slices (on the
    // host with ParamHome::Host). norm_pieces: its slices, and norm_counts
    // which of them the global norm counts on this rank.
    HostOptimizer(const OffloadPolicy& policy, const RankState<T>& rank_, int micro_steps,
                  const std::vector<ShardPiece>& norm_pieces_, std::vector<char> norm_counts_, Stream comm_stream_,
                  int cpu_threads)
        : grads_down(!rank_.sharded.grads || policy.sums == GradSums::Host ? GradsDown::AsReduced
                     : policy.delay_steps > 0                         ? GradsDown::AtLastMicroStep
                                                                      : GradsDown::InStep),
          params_up(policy.params == ParamHome::Host ? ParamsUp::Gathered
                    : policy.delay_steps > 0         ? ParamsUp::FromHostCopy
                                                     : ParamsUp::ThroughLanding),
          states(policy.states), delay_steps(policy.delay_steps), rank(rank_), plan(rank_.plan), mem(rank_.mem),
          norm_pieces(norm_pieces_), norm_counts(std::move(norm_counts_)), disk_buffers(policy.disk.buffers),
          comm_stream(comm_stream_),
          cpu_adam(dry_recorder() ? nullptr : std::make_unique<CpuAdamW>(cpu_threads)) {  // (none in a dry run)
        const size_t S = plan.shard_numel, slice = plan.largest_slice();
        const Arena H = Arena::Host;
        for (int u = 0; u < plan.num_units(); u++) unit_on_host.push_back(event_create());
        norm_pieces_of_unit.resize(plan.num_units());
        for (size_t i = 0; i < norm_pieces.size(); i++) norm_pieces_of_unit[norm_pieces[i].unit].push_back(i);
        host_norm_partials.assign(norm_pieces.size(), 0.0f);
        norm_taken.assign(plan.num_units(), 0);
        auto landing_pair = [&](T** pair, const std::string& name) {  // two host slices, name0 and name1
            for (int k = 0; k < 2; k++)
                pair[k] = mem.allocate_array<T>(slice, MemKind::Comm, H, name + std::to_string(k), false);
        };
        if (grads_down != GradsDown::InStep)
            host_grads = mem.allocate_array<T>(S, MemKind::Grads, H, "grads_shard_host", false);
        else
            landing_pair(down_landing, "grads_down_landing_host");
        if (grads_down == GradsDown::AsReduced && rank.sharded.grads && micro_steps > 1)
            landing_pair(sum_landing, "grads_sum_landing_host");
        if (delay_steps > 0) {  // the next step's gradients land here while the delayed AdamW reads the last step's
            host_grads_next = mem.allocate_array<T>(S, MemKind::Grads, H, "grads_shard_host_next", false);
            delayed = std::make_unique<HostTasks>(true);
            params_read = event_create();
        }
        switch (params_up) {
            case ParamsUp::Gathered:
                host_params = rank.params_shard;
                gather_landing = mem.allocate_array<T>(3 * slice, MemKind::Params, Arena::Device, "params_gather_landing", false);
                break;
            case ParamsUp::FromHostCopy:
                host_params = mem.allocate_array<T>(S, MemKind::Params, H, "params_shard_host", true);
                break;
            case ParamsUp::ThroughLanding:
                landing_pair(up_landing, "params_up_landing_host");
                break;
        }
        for (Event* pair : {sum_landed, up_read, down_ready})
            for (int k = 0; k < 2; k++) pair[k] = event_create();
    }
    ~HostOptimizer() {
        if (delay_steps > 0) delayed->drain();  // it reads and writes these buffers
        tasks.drain();
        for (Event e : unit_on_host) event_destroy(e);
        for (Event* pair : {sum_landed, up_read, down_ready})
            for (int k = 0; k < 2; k++) event_destroy(pair[k]);
        if (delay_steps > 0) event_destroy(params_read);
    }
    HostOptimizer(const HostOptimizer&) = delete;
    HostOptimizer& operator=(const HostOptimizer&) = delete;

    const GradsDown grads_down;
    const ParamsUp params_up;
    OffloadTimes times;  // the last step's

    // The gradient sums are on the host at the step (the norm is taken there),
    // else in the device's gradient shard.
    bool grads_on_host() const { return grads_down != GradsDown::InStep; }
    // The reduced slices add up on the device (in the engine's gradient shard).
    bool sums_on_device() const { return grads_down != GradsDown::AsReduced; }

    // ---- gradients coming down (the engine's reduce_unit, on the comm stream)

    // AsReduced: unit u's reduced slice (device) goes down; the first of the
    // step's copies straight into the host sums, later ones through a landing
    // slice that a host task adds in.
    void take_reduced(int u, const T* reduced, bool first) {
        T* sums = host_grads + plan.shard_offset[u];
        const size_t n = plan.slice_numel(u);
        if (first) return to_host(sums, reduced, n, u);
        const int k = next_sum;
        next_sum ^= 1;
        if (sum_used[k]) tasks.wait(sum_task[k]);  // its previous slice has been added
        T* landed = sum_landing[k];
        to_host(landed, reduced, n, u);
        event_record(sum_landed[k], comm_stream);
        sum_task[k] = tasks.submit(sum_landed[k], [=] {
            host_work(typed_kind<T>("host_add"), (long)n, {writes(sums, n), reads(landed, n)},
                      [=] { accumulate_cpu(sums, landed, n, false); });
        });
        sum_used[k] = true;
    }
    // AtLastMicroStep: unit u's final sums (device shard) go down.
    void take_final(int u, const T* sums) {
        if (grads_down != GradsDown::AtLastMicroStep) return;
        to_host(host_grads + plan.shard_offset[u], sums, plan.slice_numel(u), u);
    }
    // After a reduction: the host sums hold gradients from their first copy
    // down (with the device shard in between, from the last micro-step's).
    void grads_arriving(bool last) {
        if (!grads_on_host() || host_grads_live || (grads_down == GradsDown::AtLastMicroStep && !last)) return;
        host_grads_live = true;
        mem.set_live(host_grads, true);
    }
    // Unit u's final gradient slice is on its way down (after the host add
    // queued above, if any): its share of the norm is host work that runs
    // during the rest of backward.
    void unit_done(int u) {
        if (!grads_on_host()) return;
        event_record(unit_on_host[u], comm_stream);
        norm_taken[u] = 1;
        tasks.submit(unit_on_host[u], [this, u] { sumsq_of_unit(u); });
    }

    // The tied embeddings between the first and last pipeline stage
    // (zero_engine.h, exchange_tied_grads): the host sums of unit u up into
    // `dst` (AsReduced), and a slice received for unit u down into the sums.
    void sums_up(int u, T* dst) {
        stream_sync(comm_stream);
        tasks.drain();
        to_device(dst, host_grads + plan.shard_offset[u], plan.slice_numel(u), u);
    }
    void received(int u, const T* slice) {
        if (grads_on_host()) to_host(host_grads + plan.shard_offset[u], slice, plan.slice_numel(u), u);
    }

    // ---- the step

    // Backward's copies and the host tasks done; the norm's partial sums over
    // the host gradients, per norm piece (GradsDown != InStep).
    void wait_for_gradients(HostClock& clock) {
        times = OffloadTimes{};
        stream_sync(comm_stream);
        times.device_ms = clock.lap();
        tasks.drain();
        times.host_adds_ms = clock.lap();
    }
    std::vector<float> norm_partials(HostClock& clock) {
        for (int u = 0; u < plan.num_units(); u++)
            if (!norm_taken[u]) sumsq_of_unit(u);
        times.norm_ms = clock.lap();
        return host_norm_partials;
    }

    // The CPU AdamW of unit u (in the step, ParamsUp != FromHostCopy): its
    // gradient slice down first with InStep (the next unit's goes down while
    // the CPU works on this one), its output into a landing slice whose last
    // upload is done; returns where its new parameters are, for the engine to
    // upload (with ParamsUp::Gathered they are the host slice, gathered from
    // there: nothing to upload). `device_sums`: the engine's gradient shard (InStep).
    const T* update_unit(int u, const AdamWStep& s, const OptimizerConfig& oc, const T* device_sums) {
        const int k = u & 1;
        const T* g = grads_down == GradsDown::InStep ? down_landing[k] : host_grads + plan.shard_offset[u];
        if (grads_down == GradsDown::InStep) {
            if (u == 0) grads_down_unit(0, device_sums);
            if (u + 1 < plan.num_units()) grads_down_unit(u + 1, device_sums);
            event_sync(down_ready[k]);
        }
        T* out = params_up == ParamsUp::ThroughLanding ? up_landing[k] : host_params + plan.shard_offset[u];
        if (params_up == ParamsUp::ThroughLanding) event_sync(up_read[k]);
        adamw_unit(u, s, oc, g, out);
        return out;
    }
    // After the engine's upload of unit u (on the comm stream): its landing slice may be written again.
    void uploaded(int u) {
        if (params_up == ParamsUp::ThroughLanding) event_record(up_read[u & 1], comm_stream);
    }

    // The delayed update: this step's AdamW on the update thread, once the
    // uploads queued so far have read host_params (which it overwrites); every
    // gradient slice is on the host already (the step synchronised the comm
    // stream). The next step's gradients go to the other host buffer meanwhile.
    bool delays(int adam_t) const { return delay_steps > 0 && adam_t > delay_steps; }
    void queue_update(const AdamWStep& s, const OptimizerConfig& oc) {
        event_record(params_read, comm_stream);
        const T* grads = host_grads;
        delayed->submit(params_read, [this, s, oc, grads] {
            HostClock clock;
            for (int u = 0; u < plan.num_units(); u++)
                adamw_unit(u, s, oc, grads + plan.shard_offset[u], host_params + plan.shard_offset[u]);
            delayed_adamw_ms = clock.lap();
        });
        pending = true;
        times.delayed = true;
        pending_grads = host_grads;  // live until the update is applied
        std::swap(host_grads, host_grads_next);
        host_grads_live = false;
    }
    // Waits for a queued AdamW; true if there was one (the engine then uploads
    // every unit from updated_slice()).
    bool finish_pending_update() {
        if (!pending) return false;
        HostClock clock;
        delayed->drain();
        times.update_wait_ms = clock.lap();
        times.adamw_ms = delayed_adamw_ms;
        times.delayed = true;
        pending = false;
        mem.set_live(pending_grads, false);
        return true;
    }
    const T* updated_slice(int u) const { return host_params + plan.shard_offset[u]; }

    // The step is over: the host sums are free for the next one.
    void finish_step() {
        if (host_grads_live) mem.set_live(host_grads, false);
        host_grads_live = false;
        std::fill(norm_taken.begin(), norm_taken.end(), 0);
    }

    // Stage 3 with ParamHome::Host: unit u's slice up into the device landing
    // slice of parameter slot `slot`, before its all-gather; returns it.
    const T* slice_up(int u, int slot) {
        T* up = gather_landing + slot * plan.largest_slice();
        to_device(up, host_params + plan.shard_offset[u], plan.slice_numel(u), u);
        return up;
    }

    // n elements of unit u down to the host, or up, on the comm stream
    void to_host(T* dst, const T* src, size_t n, int u) {
        at_unit(u);
        device_copy(dst, src, n * sizeof(T), comm_stream);
    }
    void to_device(T* dst, const T* src, size_t n, int u) {
        at_unit(u);
        device_copy(dst, src, n * sizeof(T), comm_stream);
    }

  private:
    const StateHome states;
    const int delay_steps;
    const RankState<T>& rank;
    const ShardPlan& plan;
    MemoryAccountant& mem;
    const std::vector<ShardPiece>& norm_pieces;
    const std::vector<char> norm_counts;
    const int disk_buffers;  // the disk's ring
    const Stream comm_stream;
    std::unique_ptr<CpuAdamW> cpu_adam;
    HostTasks tasks;  // the additions and the norm's sums of squares, as the slices land

    T* host_grads = nullptr;        // (shard): the gradient sums on the host (GradsDown != InStep)
    T* down_landing[2] = {};        // InStep: two slices the device shard goes down through
    Event down_ready[2] = {};
    T* sum_landing[2] = {};         // AsReduced, stages 2-3, several micro-steps: where later slices land
    Event sum_landed[2] = {};
    uint64_t sum_task[2] = {};      // the host task that last read each
    bool sum_used[2] = {};
    int next_sum = 0;
    T* host_params = nullptr;       // (shard): the AdamW's output with FromHostCopy or Gathered
    T* up_landing[2] = {};          // ThroughLanding: two slices the new parameters go up through
    Event up_read[2] = {};          // each one's last upload has read it
    T* gather_landing = nullptr;    // Gathered: one device slice per parameter slot
    bool host_grads_live = false;

    std::vector<Event> unit_on_host;                       // (units): a unit's final slice is copied down
    std::vector<std::vector<size_t>> norm_pieces_of_unit;  // indices into norm_pieces
    std::vector<float> host_norm_partials;                 // (norm pieces)
    std::vector<char> norm_taken;                          // (units): queued this step

    // the delayed update
    std::unique_ptr<HostTasks> delayed;  // the update thread: one CPU AdamW at a time
    Event params_read{};                 // the uploads before a queued AdamW have read host_params
    T* host_grads_next = nullptr;        // (shard): the other host gradient buffer
    T* pending_grads = nullptr;          // the one the pending AdamW reads
    bool pending = false;
    double delayed_adamw_ms = 0;

    // InStep: unit u's slice of the device sums down into landing slice u % 2
    // (whose last reader, the AdamW of unit u - 2, is done).
    void grads_down_unit(int u, const T* device_sums) {
        to_host(down_landing[u & 1], device_sums + plan.shard_offset[u], plan.slice_numel(u), u);
        event_record(down_ready[u & 1], comm_stream);
    }

    // The sums of squares of unit u's pieces over their final host gradients
    // (a piece the norm counts on another rank counts 0).
    void sumsq_of_unit(int u) {
        const T* g = host_grads + plan.shard_offset[u];
        long n = 0;
        for (size_t i : norm_pieces_of_unit[u]) n += (long)norm_pieces[i].numel;
        host_work(typed_kind<T>("host_sumsq"), n, {reads(g, plan.slice_numel(u))}, [=, this] {
            for (size_t i : norm_pieces_of_unit[u]) {
                const ShardPiece& p = norm_pieces[i];
                host_norm_partials[i] = norm_counts[i] ? (float)sumsq_cpu(host_grads + p.shard_offset, p.numel) : 0.0f;
            }
        });
    }

    // The CPU AdamW of unit u's pieces, from its host gradient slice `g` into
    // master, m, v and its compute-dtype slice `out`.
    void adamw_unit(int u, const AdamWStep& s, const OptimizerConfig& oc, const T* g, T* out) {
        at_unit(u);  // (the delayed update's loop is one task: its ops are each unit's)
        const size_t o = plan.shard_offset[u];
        const ShardPlan::DiskSplit& split = rank.split;
        if (states != StateHome::Disk || u < split.first_unit)
            return adamw_range(u, o, plan.slice_numel(u), rank.master + o, rank.adam_m + o, rank.adam_v + o, s, oc, g,
                               out);
        // On disk, a tile at a time: its states come into the disk's ring (read
        // ahead while the CPU updates the tile before) and go back (written
        // behind). AdamW is element by element, so a tile's update is the
        // unit's, bit for bit. The last unit's last tile starts the reads of the
        // next step's first tiles, which then overlap its forward and backward.
        for (int t = split.first_tile[u]; t < split.first_tile[u + 1]; t++) {
            const DiskStates::View st = rank.disk->begin(t);
            adamw_range(u, split.begin + split.tiles[t].offset, split.tiles[t].n, st.master, st.m, st.v, s, oc, g, out);
            rank.disk->end(t);
        }
        if (u == plan.num_units() - 1)
            for (int t = 0; t < std::min(disk_buffers, rank.disk->num_tiles()); t++) rank.disk->prefetch(t);
    }

    // The CPU AdamW of unit u's pieces within its shard offsets [a, a + n),
    // whose master, m and v start at w, m, v (element a); g and out: the
    // unit's gradient slice and compute-dtype output, from its first element.
    void adamw_range(int u, size_t a, size_t n, float* w, float* m, float* v, AdamWStep s, const OptimizerConfig& oc,
                     const T* g, T* out) {
        struct Part {
            const ShardPiece* piece;
            size_t lo, hi;  // shard offsets
        };
        std::vector<Part> parts;
        long numel = 0;
        for (const ShardPiece& p : rank.pieces) {
            const size_t lo = std::max(a, p.shard_offset), hi = std::min(a + n, p.shard_offset + p.numel);
            if (p.unit == u && lo < hi) parts.push_back({&p, lo, hi}), numel += (long)(hi - lo);
        }
        const size_t o = plan.shard_offset[u];
        host_work(typed_kind<T>("cpu_adamw"), numel,
                  {reads(g + (a - o), n), writes(w, n), writes(m, n), writes(v, n), writes(out + (a - o), n)}, [=, this] {
                      AdamWStep st = s;
                      for (const Part& q : parts) {
                          const ShardPiece& p = *q.piece;
                          st.weight_decay = tensor_has_weight_decay(p.tensor_id) ? oc.weight_decay : 0.0f;
                          cpu_adam->step(w + (q.lo - a), m + (q.lo - a), v + (q.lo - a), g + (q.lo - o), out + (q.lo - o),
                                         q.hi - q.lo, st, p.full_offset + rank.key_shift[u] + (q.lo - p.shard_offset));
                      }
                  });
    }
};
