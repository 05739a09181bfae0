// The ZeRO engine of one rank: which parameter, gradient and optimizer bytes it
// keeps, and which collective moves which range when. The model calls four
// hooks around each unit (acquire/release its parameters, acquire/finish its
// gradients) and step() once per optimizer step; the stage decides what those
// hooks do. Everything is offset arithmetic from the ShardPlan.
//
//  stage | params (compute dtype)      | grads                         | fp32 master, m, v
//  ------+-----------------------------+-------------------------------+------------------
//    0   | full                        | full, all-reduced per unit    | full
//    1   | full                        | full, reduce-scattered        | own slices
//    2   | full                        | one unit in flight + own      | own slices
//        |                             | slices (reduce-scatter/unit)  |
//    3   | own slices + gathered units | as stage 2                    | own slices
//
// After the update, stages 1 and 2 all-gather the new parameters; stage 3
// gathers each unit before its forward and again before its backward.
//
// Offload (ZeRO-Offload): with offload_optimizer the master, m and v slices
// live in host memory, each unit's reduced gradient slice is copied to the host
// as soon as its reduce-scatter is done, a CPU AdamW updates the slices and the
// new compute-dtype parameters go back up unit by unit. With offload_param
// (stage 3) the compute-dtype slices themselves live on the host and are copied
// up just before each unit's all-gather.
//
// Offload's gradients, stages 2-3: micro-step 0 copies each reduced slice
// straight into its host gradient slice. Later micro-steps (gradient
// accumulation) add on the host: the slice lands in a host staging slice and a
// host thread adds it, reading 2 and writing 1 compute-dtype element per
// parameter per micro-step, as DeepSpeed does. A host task takes each unit's
// sums of squares for the gradient norm as soon as its final slice is there,
// so the norm is ready when backward ends. With grad_accum_on_device the
// slices add up in a device gradient shard instead, as without offload (s Psi
// / N more device bytes, s Psi / N fewer host bytes): the step takes the norm
// there and copies each unit's slice down through two host landing slices
// just ahead of its CPU AdamW. (With a delayed update each unit's slice goes
// down into a host gradient buffer at the last micro-step, since the AdamW
// runs while the next step's backward writes the shard.)
//
// Delayed parameter update (ZeRO-Offload's DPU, delay_steps = W > 0, offload
// without offload_param): the first W steps update as above. From then on the
// CPU AdamW of step t's gradients runs on a thread of its own while the device
// computes step t+1 on the parameters it already has; at step t+1's end,
// step() waits for it, sends its parameters up (stages 1-2: each slice up and
// all-gathered, stage 3: the slices up) and starts the AdamW of step t+1's
// gradients. So the parameters the device computes with lack the last queued
// update, while master, m and v take every gradient once, in order. The
// pending AdamW reads one host gradient buffer while the next step's slices
// land in the other; the two alternate. A skipped step (fp16 overflow) and
// apply_pending_update() (a checkpoint, the end of a run) bring the device up
// to date, and the step after starts the delay again with nothing pending,
// as step W does: a resumed run continues bit for bit.
//
// Streams: kernels run on the compute stream; collectives and copies on the
// comm stream. They are ordered by events only. Gradient accumulation: stages
// 0 and 1 accumulate in the full gradient buffer and communicate on the last
// micro-step; stages 2 and 3 reduce-scatter every micro-step and accumulate
// into their gradient slices. Gradients are in the compute dtype throughout (as
// in the ZeRO paper's accounting); masters and moments are fp32.
//
// Tensor parallelism: the layout is then one tensor-parallel rank's (t-local
// units, zero/layout/tp_plan.h), `comm` is the rank's data group, and all of
// the above runs unchanged on it. The tensor group enters only where the
// whole model matters: the initial values (cut from the full model's), and
// the global gradient norm, which sums the split tensors over the tensor group
// and counts the replicated ones once.
//
// Pipeline parallelism: the layout is one stage's units (zero/layout/
// pipeline_plan.h), `comm` the stage's data group, `pipe` the rank's pipeline
// group (one rank per stage). The engine then meets the other stages three
// times. The norm: each stage adds its slices' sums of squares to the running
// sum of the stages before it, so the sum runs over the units in the whole
// model's order, as on one stage. Stochastic rounding draws from an element's
// position in the whole model's buffer. And the tied embeddings, wte being
// both the first stage's encoder table and the last stage's LM head:
//
//   the head's gradient (H) and the encoder's (E) accumulate apart over a
//   step's micro-steps and meet once per step, E + H, before (stages 0-1) or
//   at (2-3) the data-parallel reduction of unit 0:
//     stages 0-1: the first and last stage all-reduce unit 0's gradient (E + H
//       on both), then each reduces it over its data group as usual;
//     stages 2-3, which reduce unit 0 every micro-step: the last stage keeps H
//       in its unit-0 gradient slot for the step and sends it to the first,
//       which receives it into the slot of its last micro-step before the
//       encoder adds that micro-step's E; the first stage's reduced slices
//       then go back to the last stage.
//   Either way both copies take the same AdamW step on the same bits. A rank
//   holding both ends (no pipeline) does the same with a head-gradient buffer
//   of its own when it accumulates micro-steps, so that --pp 1 sums in the
//   order --pp P does; with one micro-step the head writes unit 0's buffer
//   and the encoder adds to it: H + E.
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/kernels.h"
#include "zero/comm/comm.h"
#include "kernels/cpu/adamw_simd.h"
#include "zero/engine/host_tasks.h"
#include "zero/base/memory.h"
#include "zero/layout/param_layout.h"
#include "zero/base/rng.h"
#include "zero/layout/shard_plan.h"
#include "zero/engine/unit_slots.h"

// Optimizer offload: where a step's host time went, in the order the step
// spends it (milliseconds of the rank's thread). device: waiting for backward
// and the gradients' copies down to finish; host_adds: host tasks still
// running after that (the accumulation, and each unit's sums of squares for
// the norm, queued as its final slice lands); norm: adding those up;
// adamw: the CPU AdamW (the uploads after each unit overlap it). What a step
// takes beyond these is the device's own work. With a delayed update (delayed)
// the step instead waits for the AdamW queued by the step before (update_wait)
// and adamw_ms is how long that AdamW took on its own thread.
struct OffloadTimes {
    double device_ms = 0, host_adds_ms = 0, norm_ms = 0, adamw_ms = 0, update_wait_ms = 0;
    bool delayed = false;
};

struct ZeroConfig {
    int stage = 1;
    int micro_steps = 1;             // gradient accumulation
    bool offload_optimizer = false;  // stages 1-3: master, m, v (and gradient slices) in host memory
    bool offload_param = false;      // stage 3 with offload_optimizer: the compute-dtype slices in host memory
    bool grad_accum_on_device = false;  // offload at stages 2-3 with micro_steps > 1: accumulate on the device
    uint64_t seed = 0;               // stochastic rounding of the bf16 parameter copies
    int cpu_threads = 1;             // the CPU AdamW's threads (offload)
    int delay_steps = 0;             // offload: W > 0 delays every update after the first W by a step (see the header)
};

// AdamW's hyperparameters and the clip, as the run was told (optimizer_config()
// in zero/run/run_setup.h; the defaults live in zero/run/options.h only).
struct OptimizerConfig {
    float beta1 = 0, beta2 = 0, eps = 0;
    float weight_decay = 0;
    float grad_clip = 0;  // global-norm clip; <= 0 disables
};

struct StepResult {
    float grad_norm;  // of the unscaled gradient, before clipping
    bool skipped;     // a gradient was inf/NaN on some rank: nobody updated
};

template <typename T>
class ZeroEngine {
  public:
    // comm: the ranks ZeRO shards across (the data group); tensor: the rank's
    // tensor group when layout_.tp > 1, else null; pipe and tied: its pipeline
    // group and its first-and-last-stage pair when layout_ is a stage of
    // several, else null.
    ZeroEngine(const ParamLayout& layout_, Comm& comm_, MemoryAccountant& mem_, const KernelCtx& compute_,
               const ZeroConfig& cfg, Comm* tensor_ = nullptr, Comm* pipe_ = nullptr, Comm* tied_ = nullptr)
        : layout(layout_),
          plan(layout_.unit_specs(), comm_.world, SHARD_ALIGN),
          comm(comm_),
          mem(mem_),
          ctx(compute_),
          stage(cfg.stage),
          micro_steps(cfg.micro_steps),
          rank(comm_.rank),
          world(comm_.world),
          seed(cfg.seed),
          offload_optimizer(cfg.offload_optimizer),
          offload_param(cfg.offload_param),
          device_accum(cfg.offload_optimizer && cfg.stage >= 2 && cfg.grad_accum_on_device),
          delay_steps(cfg.delay_steps),
          grads_down_in_step(device_accum && delay_steps == 0),
          tensor(tensor_),
          tp_rank(tensor_ ? tensor_->rank : 0),
          pipe(pipe_),
          tied(tied_) {
        CHECK((layout.tp > 1) == (tensor != nullptr) && (!tensor || tensor->world == layout.tp),
              "internal: a tensor-parallel layout needs its tensor group, and only it");
        CHECK(layout.pipelined() == (pipe != nullptr) && (!pipe || pipe->world == layout.stage.stages) &&
                  (!tied || (layout.has_embed() && tied->world == 2)),
              "internal: a pipeline stage's layout needs its pipeline group, and only it");
        // stochastic rounding keys: an element's offset in the whole model's buffer
        ShardPlan whole(ParamLayout(layout.cfg, layout.tp).unit_specs(), comm_.world, SHARD_ALIGN);
        for (int u = 0; u < plan.num_units(); u++)
            key_shift.push_back(whole.full_offset[layout.global_unit(u)] - plan.full_offset[u]);
        std::string err = plan.validate();
        CHECK(err.empty(), "%s", err.c_str());
        CHECK(stage >= 0 && stage <= 3, "ZeRO stage must be 0, 1, 2 or 3 (got %d)", stage);
        CHECK(!offload_optimizer || stage >= 1, "optimizer offload needs ZeRO stage 1, 2 or 3");
        CHECK(!offload_param || (stage == 3 && offload_optimizer),
              "parameter offload needs ZeRO stage 3 and optimizer offload");
        CHECK(delay_steps == 0 || (offload_optimizer && !offload_param),
              "a delayed parameter update needs optimizer offload without parameter offload");
        comm_stream = stream_create("the comm stream");
        compute_done = event_create();
        comm_done = event_create();
        for (Event& e : staging_ready) e = event_create();
        for (Event& e : param_landing_read) e = event_create();
        for (Event& e : grads_down_ready) e = event_create();
        pieces = stage == 0 ? plan.pieces_full() : plan.pieces_of_rank(rank);
        norm_pieces = plan.pieces_of_rank(rank);
        if (offload_optimizer) {
            cpu_adam = std::make_unique<CpuAdamW>(cfg.cpu_threads);
            unit_on_host.resize(plan.num_units());
            for (Event& e : unit_on_host) e = event_create();
            norm_pieces_of_unit.resize(plan.num_units());
            for (size_t i = 0; i < norm_pieces.size(); i++) norm_pieces_of_unit[norm_pieces[i].unit].push_back(i);
            host_norm_partials.assign(norm_pieces.size(), 0.0f);
            host_norm_taken.assign(plan.num_units(), 0);
        }
        if (delay_steps > 0) {
            delayed = std::make_unique<HostTasks>(true);
            params_uploaded = event_create();
        }
        allocate();
    }
    ~ZeroEngine() {
        if (delayed) delayed->drain();  // it uses this engine's buffers
        host_tasks.drain();
        param_slots.reset();
        grad_slots.reset();
        for (Event& e : staging_ready) event_destroy(e);
        for (Event& e : param_landing_read) event_destroy(e);
        for (Event& e : grads_down_ready) event_destroy(e);
        for (Event& e : unit_on_host) event_destroy(e);
        if (delayed) event_destroy(params_uploaded);
        event_destroy(compute_done);
        event_destroy(comm_done);
        stream_destroy(comm_stream);
    }
    ZeroEngine(const ZeroEngine&) = delete;
    ZeroEngine& operator=(const ZeroEngine&) = delete;

    const ParamLayout& layout;
    const ShardPlan plan;
    Comm& comm;
    MemoryAccountant& mem;
    const KernelCtx ctx;
    const int stage, micro_steps, rank, world;
    const uint64_t seed;
    const bool offload_optimizer, offload_param;
    // offload, stages 2-3: gradients accumulate in grad_shard on the device and
    // go down to the host once per step, during the step (grads_down_in_step)
    // or, with a delayed update, at the last micro-step
    const bool device_accum;
    const int delay_steps;  // the delayed parameter update's W, or 0
    const bool grads_down_in_step;
    Comm* const tensor;  // the tensor group, or null
    const int tp_rank;
    Comm* const pipe;  // the pipeline group (rank = stage), or null
    Comm* const tied;  // the first and last stage of this rank's pipeline group (stages 0-1's tied all-reduce), or null
    int adam_t = 0;  // optimizer steps taken (skipped steps do not count)

    OffloadTimes offload_times;  // optimizer offload: the last step's host phases

    // ---------------------------------------------------------------------
    // Parameters: initialisation and loading.
    //
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

    // GPT-2 initialisation from a seed: element i of tensor t, layer l gets
    // N(0, std_t) from the counter-based generator keyed by (seed, t, l, i), so
    // every rank computes the same value for it whatever the world size. With
    // tensor parallelism i is the element's index in the full tensor: the full
    // unit is drawn and this rank's part cut from it.
    void init_parameters(uint64_t init_seed) {
        ParamLayout whole = layout.whole_tensors();
        std::vector<float> full_unit;
        load_parameters([&](int u, float* dst) {
            if (layout.tp > 1) full_unit.assign(whole.unit_spec(u).numel, 0.0f);
            float* values = layout.tp > 1 ? full_unit.data() : dst;
            for (const TensorSpec& ts : whole.unit_spec(u).tensors) {
                float std_ = layout.init_std(ts.id), c = layout.init_constant(ts.id);
                uint64_t stream_seed = mix64(init_seed ^ mix64(((uint64_t)ts.id << 32) | (uint64_t)ts.layer));
                size_t real = layout.init_real_numel(ts.id);
                float* out = values + ts.offset_in_unit;
#pragma omp parallel for schedule(static)
                for (size_t i = 0; i < real; i++) out[i] = std_ > 0 ? std_ * random_normal(stream_seed, i) : c;
            }
            if (layout.tp > 1) layout.tp_slice_unit(tp_rank, u, full_unit.data(), dst);
        });
    }

    // ---------------------------------------------------------------------
    // The hooks of a forward(+backward) pass. The model visits units in a fixed
    // order; stage 3 uses it to prefetch the next unit's gather.

    // Forward visits [embeddings] the layers [final layernorm, unit 0 again for
    // the tied LM head]; backward [the head] [final layernorm] the layers in
    // reverse (the encoder needs no parameters). Without a pipeline a training
    // pass is both, and unit 0 stays held from the head's forward to its
    // backward; a pipeline stage runs other micro-batches in between, so its
    // head acquires unit 0 again for the backward.
    void begin_pass(bool forward, bool backward) {
        visits.clear();
        const int lo = layout.has_embed() ? 1 : 0, hi = lo + layout.stage.num_layers - 1;  // the layer units
        if (forward) {
            if (layout.stage.first) visits.push_back(layout.embed_unit());
            for (int u = lo; u <= hi; u++) visits.push_back(u);
            if (layout.stage.last) visits.push_back(layout.final_unit()), visits.push_back(layout.embed_unit());
        }
        if (backward) {
            if (layout.stage.last && layout.pipelined()) visits.push_back(layout.embed_unit());
            if (layout.stage.last) visits.push_back(layout.final_unit());
            for (int u = hi; u >= lo; u--) visits.push_back(u);
        }
        cursor = 0;
        // the previous step's parameter all-gather must be complete
        stream_wait(ctx.stream, comm_done);
    }

    // Unit u's full parameters, ready on the compute stream. Stage 3 gathers
    // them here (unless prefetched) and starts gathering the next unit visited.
    const T* acquire_params(int u) {
        CHECK(cursor < visits.size() && visits[cursor] == u,
              "internal: model visited unit %d out of order (expected %d)", u,
              cursor < visits.size() ? visits[cursor] : -1);
        cursor++;
        if (stage < 3) return params_full + plan.full_offset[u];
        UnitSlot<T>* slot = param_slots->holding(u);
        if (!slot) slot = gather_params(u);
        CHECK(slot, "internal: no free slot to gather unit %d", u);
        stream_wait(ctx.stream, slot->ready);
        slot->in_use = true;
        if (cursor < visits.size() && !param_slots->holding(visits[cursor]) && param_slots->vacant_for(visits[cursor]))
            gather_params(visits[cursor]);  // prefetch the next visit
        return slot->ptr;
    }

    void release_params(int u) {
        if (stage < 3) return;
        UnitSlot<T>* slot = param_slots->holding(u);
        CHECK(slot && slot->in_use, "internal: release of unit %d that is not held", u);
        vacate(*slot, ctx.stream);
    }

    // Drop prefetched units a pass did not use (an evaluation pass stops at the
    // LM head; nothing else should remain).
    void end_pass() {
        if (stage < 3) return;
        for (auto& s : param_slots->slots)
            if (s.unit >= 0 && !s.in_use) vacate(s, comm_stream);
    }

    // Unit u's full-size gradient buffer to accumulate into, on the compute
    // stream. Asked again within a micro-step (the tied wte) it is the same.
    T* acquire_grads(int u, int micro_step) {
        if (stage < 2) {
            if (micro_step == 0 && !grads_live) {
                device_zero(grads_full, plan.full_numel * sizeof(T), ctx.stream);
                grads_live = true;
                mem.set_live(grads_full, true);
            }
            return grads_full + plan.full_offset[u];
        }
        UnitSlot<T>* slot = grad_slots->holding(u);
        if (slot) return slot->ptr;
        slot = grad_slots->vacant_for(u);
        CHECK(slot, "internal: no free gradient slot for unit %d", u);
        stream_wait(ctx.stream, slot->free);  // its previous reduce-scatter has read it
        device_zero(slot->ptr, plan.padded[u] * sizeof(T), ctx.stream);
        slot->unit = u;
        slot->in_use = true;
        mem.set_live(slot->ptr, true);
        if (u == layout.embed_unit() && layout.stage.first && micro_step == micro_steps - 1 && (pipe || head_grads))
            take_head_grads(slot->ptr);
        return slot->ptr;
    }

    // The LM head's gradient of wte, (Vp/t, C), to accumulate into: a buffer of
    // its own on a rank that holds the encoder too and accumulates micro-steps,
    // else unit 0's gradient (on the last stage its copy's, kept over the step).
    T* acquire_head_grads(int micro_step) {
        if (!head_grads) return acquire_grads(layout.embed_unit(), micro_step) + layout.offset_in_unit(WTE);
        if (micro_step == 0) {
            device_zero(head_grads, layout.numel(WTE) * sizeof(T), ctx.stream);
            mem.set_live(head_grads, true);
        }
        return head_grads;
    }

    // Backward has finished unit u for this micro-step: communicate what the
    // stage says, on the comm stream, once the compute stream gets here.
    void grads_done(int u, int micro_step) {
        bool last = micro_step == micro_steps - 1;
        if (stage < 2 && !last) return;
        if (u == layout.embed_unit() && stage < 2 && head_grads) {  // the step's H joins E before the reduction
            accumulate(ctx, grads_full + plan.full_offset[u] + layout.offset_in_unit(WTE), head_grads,
                       layout.numel(WTE), false);
            mem.set_live(head_grads, false);
        }
        if (u == layout.embed_unit() && stage < 2 && tied) return;  // reduced in step(), after the tied all-reduce
        event_record(compute_done, ctx.stream);
        stream_wait(comm_stream, compute_done);
        reduce_unit(u, micro_step);
    }

    // ---------------------------------------------------------------------
    // The optimizer step: global norm from the slices, clip, unscale, AdamW on
    // this rank's pieces, then (stages 1, 2) all-gather the new parameters.
    StepResult step(float lr, const OptimizerConfig& oc, float loss_scale) {
        HostClock clock;
        offload_times = OffloadTimes{};
        if (tied) exchange_tied_grads();
        stream_wait(ctx.stream, comm_done);  // all gradient collectives are complete
        if (offload_optimizer) {             // and every slice has arrived on the host
            stream_sync(comm_stream);
            offload_times.device_ms = clock.lap();
            host_tasks.drain();
            offload_times.host_adds_ms = clock.lap();
        }

        // sum of squares over the slices this rank owns, in every stage (stage 0
        // too), so the norm has the same bits whatever the stage. With host
        // gradients (offload) the host tasks queued by grads_done have taken them
        // unit by unit; a device gradient shard (offload too) is summed here.
        std::vector<float> partials(norm_pieces.size());
        if (host_grads) {
            for (int u = 0; u < plan.num_units(); u++)
                if (!host_norm_taken[u]) host_sumsq_of_unit(u);
            partials = host_norm_partials;
            offload_times.norm_ms = clock.lap();
        } else {
            for (size_t i = 0; i < norm_pieces.size(); i++) {
                const ShardPiece& p = norm_pieces[i];
                if (counted_elsewhere(p)) partials[i] = 0.0f;
                else if (stage < 2) sumsq(ctx, norm_partials + i, grads_full + p.full_offset, p.numel);
                else sumsq(ctx, norm_partials + i, grad_shard + p.shard_offset, p.numel);
            }
            copy_to_host(partials.data(), norm_partials, partials.size() * sizeof(float));
        }
        // in the order of the whole model's units: a pipeline stage continues the
        // sum of the stages before it (a scalar reduction per stage, the others
        // adding zeros), so that every stage ends with one rank's sum of its slices
        double local = 0.0;
        const int stages = pipe ? pipe->world : 1, my_stage = pipe ? pipe->rank : 0;
        for (int st = 0; st < stages; st++) {
            if (st == my_stage)
                for (size_t i = 0; i < partials.size(); i++)
                    if (!counted_elsewhere(norm_pieces[i])) local += partials[i];
            if (pipe) local = pipe->sum_scalar(st == my_stage ? local : 0.0);
        }
        double total = comm.sum_scalar(local);  // non-finite if any rank saw inf/NaN
        if (tensor) total = tensor->sum_scalar(total);  // the tensor group's parts
        bool overflow = !std::isfinite(total);
        float grad_norm = overflow ? INFINITY : (float)(std::sqrt(total) / loss_scale);

        StepResult result{grad_norm, overflow};
        apply_pending_update();  // (a skipped step too: the device catches up, nothing new is queued)
        if (overflow) {
            finish_step();
            return result;
        }
        adam_t++;
        float clip = (oc.grad_clip > 0.0f && grad_norm > oc.grad_clip) ? oc.grad_clip / grad_norm : 1.0f;
        AdamWStep s;
        s.lr = lr;
        s.beta1 = oc.beta1;
        s.beta2 = oc.beta2;
        s.eps = oc.eps;
        s.grad_scale = clip / loss_scale;
        s.bias_correction1 = 1.0f - powf(oc.beta1, (float)adam_t);
        s.bias_correction2 = 1.0f - powf(oc.beta2, (float)adam_t);
        s.rounding_seed = rounding_seed(adam_t);
        if (delayed && adam_t > delay_steps) {
            queue_update(s, oc);
        } else if (offload_optimizer) {
            clock.lap();  // (the norm's all-reduce is not the CPU AdamW's)
            step_on_host(s, oc);
            offload_times.adamw_ms = clock.lap();
        } else {
            step_on_device(s, oc);
        }
        finish_step();
        return result;
    }

    // Delayed update: waits for the CPU AdamW the last step queued, if any, and
    // sends its parameters up (stages 1-2: each rank's slice, all-gathered; stage
    // 3: the slices, gathered at the next forward), so that the device holds
    // every update. step() calls it before queuing the next update; a checkpoint
    // and the end of a run call it so that master, m, v and the device's
    // parameters agree (every rank together: stages 1-2 all-gather). The step
    // after it has nothing to wait for and starts the delay again.
    void apply_pending_update() {
        if (!update_pending) return;
        HostClock clock;
        delayed->drain();
        offload_times.update_wait_ms = clock.lap();
        offload_times.adamw_ms = delayed_adamw_ms;
        offload_times.delayed = true;
        update_pending = false;
        mem.set_live(pending_grads, false);
        for (int u = 0; u < plan.num_units(); u++) upload_unit(u, host_params + plan.shard_offset[u]);
        event_record(comm_done, comm_stream);
    }

    // Raw state, for checkpoints and tests. Master/m/v are indexed by the
    // pieces' shard_offset (stage 0: the full offset); they may be host memory.
    float* master_weights() { return master; }
    float* adam_m_state() { return adam_m; }
    float* adam_v_state() { return adam_v; }
    // Stages 0-1: the full gradient buffer (for inspection by tests; valid
    // between backward and step).
    const T* full_gradients() const { return grads_full; }
    // Stages 0-2: the full compute-dtype parameters the next pass computes with
    // (for tests that set them; outside a step, after the comm stream's gathers).
    T* full_parameters() {
        stream_sync(comm_stream);
        return params_full;
    }
    size_t optimizer_numel() const { return stage == 0 ? plan.full_numel : plan.shard_numel; }

    // Unit u's full compute-dtype parameters outside a pass, for a checkpoint or a
    // model file: acquire_params / release_params without the pass's visiting
    // order (stage 3 gathers into a slot; every rank must call this together).
    const T* acquire_params_for_export(int u) {
        if (stage < 3) {
            // stages 1-2: peers' slices arrive by the post-step all-gather on the comm stream
            stream_wait(ctx.stream, comm_done);
            return params_full + plan.full_offset[u];
        }
        UnitSlot<T>* slot = gather_params(u);
        CHECK(slot, "internal: no free slot to export unit %d", u);
        stream_wait(ctx.stream, slot->ready);
        slot->in_use = true;
        return slot->ptr;
    }
    void release_params_after_export(int u) {
        if (stage < 3) return;
        vacate(*param_slots->holding(u), ctx.stream);
    }

    // After loading master weights (checkpoint resume): rebuild the compute-dtype
    // copy exactly as the AdamW step that produced them wrote it.
    void refresh_params_from_master() {
        for (const ShardPiece& p : pieces)
            write_rounded(own_params(p), master + p.shard_offset, p.numel, rounding_seed(adam_t), key(p));
        if (stage == 1 || stage == 2)
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
    void copy_to_device(void* dst, const void* src, size_t bytes) {
        device_copy(dst, src, bytes, ctx.stream);
        stream_sync(ctx.stream);
    }

  private:
    Stream comm_stream{};
    Event compute_done{}, comm_done{};
    std::vector<ShardPiece> pieces;       // what this rank's optimizer updates
    std::vector<ShardPiece> norm_pieces;  // this rank's slices (for the global norm)
    std::vector<int> visits;
    size_t cursor = 0;
    std::vector<size_t> key_shift;  // (units): whole model's full offset minus this plan's
    bool grads_live = false, device_grads_live = false, host_grads_live = false;

    T* params_full = nullptr;    // stages 0-2: (full_numel)
    T* params_shard = nullptr;   // stage 3: (shard_numel), on the host with offload_param
    T* grads_full = nullptr;     // stages 0-1: (full_numel)
    T* grad_shard = nullptr;     // stages 2-3 without offload or with device_accum: (shard_numel)
    T* comm_buffer = nullptr;    // stages 2-3: one slice, the reduce-scatter's landing place
    T* head_grads = nullptr;     // (Vp/t, C): the LM head's wte gradient, apart over the micro-steps (see the header)
    float* master = nullptr;     // fp32 master, Adam m and v: (optimizer_numel), host with offload
    float* adam_m = nullptr;
    float* adam_v = nullptr;
    float* norm_partials = nullptr;
    std::unique_ptr<UnitSlots<T>> param_slots, grad_slots;

    // optimizer offload
    std::unique_ptr<CpuAdamW> cpu_adam;
    HostTasks host_tasks;
    T* host_grads = nullptr;        // (shard_numel): reduced gradient slices on the host (null if grads_down_in_step)
    T* host_params = nullptr;       // (shard_numel): the CPU AdamW's compute-dtype output with offload_param (the
                                    // shard itself) or a delayed update (uploaded after it); else null and
    T* param_landing[2] = {};       // two slices it goes up through, a unit at a time
    Event param_landing_read[2] = {};  // each slice's last upload has read it
    T* grads_down[2] = {};          // grads_down_in_step: two slices the gradient shard goes down through
    Event grads_down_ready[2] = {};
    T* host_staging[2] = {};        // stages 2-3, accumulating on the host: two slices where reduced slices land
    Event staging_ready[2] = {};
    std::vector<Event> unit_on_host;              // (units): a unit's final slice is copied to host_grads
    std::vector<std::vector<size_t>> norm_pieces_of_unit;  // indices into norm_pieces
    std::vector<float> host_norm_partials;        // (norm_pieces): sums of squares of the host gradients
    std::vector<char> host_norm_taken;            // (units): host_norm_partials of the unit are queued this step
    uint64_t staging_task[2] = {};  // the host task that last read each staging slice
    bool staging_used[2] = {};
    int next_staging = 0;
    T* param_staging = nullptr;     // offload_param: one device slice per parameter slot

    // delayed parameter update (delay_steps > 0)
    std::unique_ptr<HostTasks> delayed;  // the update thread: one CPU AdamW at a time
    Event params_uploaded{};             // the uploads before a queued AdamW have read host_params
    T* host_grads_next = nullptr;        // (shard_numel): the other host gradient buffer
    T* pending_grads = nullptr;          // the one the pending AdamW reads
    bool update_pending = false;
    double delayed_adamw_ms = 0;         // how long the last queued AdamW took, on its thread

    void allocate() {
        size_t full = plan.full_numel, shard = plan.shard_numel, slice = plan.largest_slice();
        const Arena D = Arena::Device, H = Arena::Host;
        if (stage < 3) {
            params_full = mem.allocate_array<T>(full, MemKind::Params, D, "params", true);
        } else {
            params_shard = mem.allocate_array<T>(shard, MemKind::Params, offload_param ? H : D, "params_shard", true);
            param_slots = std::make_unique<UnitSlots<T>>(plan, mem, MemKind::Params, "params_gathered");
            if (offload_param)
                param_staging = mem.allocate_array<T>(3 * slice, MemKind::Params, D, "params_upload", false);
        }
        if (layout.stage.first && layout.stage.last && micro_steps > 1)
            head_grads = mem.allocate_array<T>(layout.numel(WTE), MemKind::Grads, D, "grads_lm_head", false);
        if (stage < 2) {
            grads_full = mem.allocate_array<T>(full, MemKind::Grads, D, "grads", false);
        } else {
            grad_slots = std::make_unique<UnitSlots<T>>(plan, mem, MemKind::Grads, "grads_unit");
            comm_buffer = mem.allocate_array<T>(slice, MemKind::Comm, D, "reduce_scatter_landing", false);
            if (!offload_optimizer || device_accum)
                grad_shard = mem.allocate_array<T>(shard, MemKind::Grads, D, "grads_shard", false);
        }
        size_t opt = optimizer_numel();
        Arena oa = offload_optimizer ? H : D;
        master = mem.allocate_array<float>(opt, MemKind::Optimizer, oa, "master_fp32", true);
        adam_m = mem.allocate_array<float>(opt, MemKind::Optimizer, oa, "adam_m", true);
        adam_v = mem.allocate_array<float>(opt, MemKind::Optimizer, oa, "adam_v", true);
        if (offload_optimizer) {
            if (!grads_down_in_step) host_grads = mem.allocate_array<T>(shard, MemKind::Grads, H, "grads_shard_host", false);
            else
                for (int k = 0; k < 2; k++)
                    grads_down[k] = mem.allocate_array<T>(slice, MemKind::Comm, H, "grads_down_host" + std::to_string(k),
                                                          false);
            if (delay_steps > 0)  // the next step's gradients, while the delayed AdamW reads the last step's
                host_grads_next = mem.allocate_array<T>(shard, MemKind::Grads, H, "grads_shard_host_next", false);
            if (offload_param) host_params = params_shard;
            else if (delay_steps > 0)
                host_params = mem.allocate_array<T>(shard, MemKind::Params, H, "params_shard_host", true);
            else
                for (int k = 0; k < 2; k++)
                    param_landing[k] = mem.allocate_array<T>(slice, MemKind::Comm, H,
                                                             "params_landing_host" + std::to_string(k), false);
            if (stage >= 2 && micro_steps > 1 && !device_accum)
                for (int k = 0; k < 2; k++)
                    host_staging[k] = mem.allocate_array<T>(slice, MemKind::Comm, H,
                                                            "grads_landing_host" + std::to_string(k), false);
        }
        if (!offload_optimizer || grads_down_in_step)
            norm_partials = mem.allocate_array<float>(norm_pieces.size(), MemKind::Scratch, D, "norm_partials", false);
    }

    // Unit u's reduction of this micro-step, on the comm stream (grads_done starts
    // it): the stage's collective over the data group, and the slice's way into
    // the gradient shard or down to the host.
    void reduce_unit(int u, int micro_step) {
        bool last = micro_step == micro_steps - 1;
        comm.unit = u;
        size_t slice = plan.slice_numel(u);
        T* host_slice = host_grads ? host_grads + plan.shard_offset[u] : nullptr;
        if (stage == 0) {
            comm.all_reduce_sum(grads_full + plan.full_offset[u], plan.padded[u], dtype_of<T>::value, comm_stream);
        } else if (stage == 1) {
            T* mine = grads_full + plan.full_offset[u] + rank * slice;
            comm.reduce_scatter_sum(mine - rank * slice, mine, slice, dtype_of<T>::value, comm_stream);
            if (offload_optimizer) to_host(host_slice, mine, slice, u);
        } else {
            UnitSlot<T>* slot = grad_slots->holding(u);
            CHECK(slot, "internal: gradients of unit %d finished but not held", u);
            comm.reduce_scatter_sum(slot->ptr, comm_buffer, slice, dtype_of<T>::value, comm_stream);
            T* device_slice = grad_shard ? grad_shard + plan.shard_offset[u] : nullptr;
            if (offload_optimizer && !device_accum) {
                if (micro_step == 0) to_host(host_slice, comm_buffer, slice, u);
                else accumulate_on_host(host_slice, slice, u);
            } else {
                KernelCtx c = ctx;
                c.stream = comm_stream;
                accumulate(c, device_slice, comm_buffer, slice, micro_step == 0);
                if (host_slice && last) to_host(host_slice, device_slice, slice, u);
            }
            vacate(*slot, comm_stream);
        }
        // gradient bytes held from here to the step: the device shard from the
        // first micro-step, the host slices from their first copy down
        if (grad_shard && !device_grads_live) {
            device_grads_live = true;
            mem.set_live(grad_shard, true);
        }
        if (host_grads && !host_grads_live && (!device_accum || last)) {
            host_grads_live = true;
            mem.set_live(host_grads, true);
        }
        if (host_grads && last) {
            // the unit's final slice is on its way to host_grads (after the host
            // add queued above, if any): its share of the norm is host work that
            // can run during the rest of backward instead of in step()
            event_record(unit_on_host[u], comm_stream);
            host_norm_taken[u] = 1;
            host_tasks.submit(unit_on_host[u], [this, u] { host_sumsq_of_unit(u); });
        }
        event_record(comm_done, comm_stream);
    }

    // A replicated tensor's gradient is the same on every rank of a tensor group:
    // the norm counts it on the group's rank 0 only; the tied embeddings' on the
    // first pipeline stage only.
    bool counted_elsewhere(const ShardPiece& p) const {
        return (tensor && tp_rank != 0 && layout.tp_replicated(p.tensor_id)) ||
               (layout.head_copy() && p.unit == layout.embed_unit());
    }

    // Stages 2-3, the encoder's last micro-step: the head's gradient of the step
    // into unit 0's fresh slot, which the encoder then adds its own to (H + E):
    // from the last stage (exchange_tied_grads sends it), or this rank's buffer.
    void take_head_grads(T* unit0) {
        T* dwte = unit0 + layout.offset_in_unit(WTE);
        const size_t n = layout.numel(WTE);
        if (pipe) return pipe->recv(dwte, n * sizeof(T), pipe->world - 1, ctx.stream);
        device_copy(dwte, head_grads, n * sizeof(T), ctx.stream);
        mem.set_live(head_grads, false);
    }

    // Pipelined, on the first and the last stage, at the step: the tied
    // embeddings' gradient summed between the two (see the header).
    void exchange_tied_grads() {
        const int u = layout.embed_unit(), first = 0, last = pipe->world - 1;
        pipe->unit = u;
        if (tied) tied->unit = u;
        event_record(compute_done, ctx.stream);
        stream_wait(comm_stream, compute_done);
        if (stage < 2) {  // E + H on both, then each reduces unit 0 as it does every unit
            tied->all_reduce_sum(grads_full + plan.full_offset[u], plan.padded[u], dtype_of<T>::value, comm_stream);
            return reduce_unit(u, micro_steps - 1);
        }
        if (layout.stage.last) {  // H to the first stage, which waits for it in its last micro-step
            UnitSlot<T>* slot = grad_slots->holding(u);
            CHECK(slot, "internal: the LM head's gradient is not held");
            pipe->send(slot->ptr + layout.offset_in_unit(WTE), layout.numel(WTE) * sizeof(T), first, comm_stream);
            vacate(*slot, comm_stream);
        }
        // the first stage's reduced slice of unit 0 goes to the last; where the
        // slices add up on the host, through the device's landing slice
        const size_t bytes = plan.slice_numel(u) * sizeof(T);
        T* slice = grad_shard ? grad_shard + plan.shard_offset[u] : comm_buffer;
        T* host_slice = host_grads ? host_grads + plan.shard_offset[u] : nullptr;
        if (layout.stage.first) {
            if (!grad_shard) {
                stream_sync(comm_stream);
                host_tasks.drain();
                to_device(slice, host_slice, plan.slice_numel(u), u);
            }
            pipe->send(slice, bytes, last, comm_stream);
        } else {
            pipe->recv(slice, bytes, first, comm_stream);
            if (host_slice) to_host(host_slice, slice, plan.slice_numel(u), u);
        }
        event_record(comm_done, comm_stream);
    }

    // Optimizer offload: the sums of squares of unit u's pieces over their final
    // host gradients (a replicated tensor on a tensor rank other than 0 counts 0).
    void host_sumsq_of_unit(int u) {
        for (size_t i : norm_pieces_of_unit[u]) {
            const ShardPiece& p = norm_pieces[i];
            check_host("a host sum of squares", {reads(host_grads + p.shard_offset, p.numel)});
            host_norm_partials[i] = counted_elsewhere(p) ? 0.0f : (float)sumsq_cpu(host_grads + p.shard_offset, p.numel);
        }
    }

    // A piece's stochastic-rounding key: its offset in the whole model's buffer.
    size_t key(const ShardPiece& p) const { return p.full_offset + key_shift[p.unit]; }

    // Where this rank's compute-dtype copy of piece p lives.
    T* own_params(const ShardPiece& p) const {
        return stage < 3 ? params_full + p.full_offset : params_shard + p.shard_offset;
    }

    // n elements of unit u down to the host, on the comm stream (traced: the
    // step-time model lists every host transfer)
    void to_host(T* dst, const T* src, size_t n, int u) {
        comm.note_transfer("to_host", n * sizeof(T), u);
        device_copy(dst, src, n * sizeof(T), comm_stream);
    }
    void to_device(T* dst, const T* src, size_t n, int u) {
        comm.note_transfer("to_device", n * sizeof(T), u);
        device_copy(dst, src, n * sizeof(T), comm_stream);
    }

    // Stages 1-2: all-gather unit u's parameters in place (each rank has updated its slice).
    void gather_full_params(int u, Stream s) {
        comm.unit = u;
        T* unit = params_full + plan.full_offset[u];
        size_t slice = plan.slice_numel(u);
        comm.all_gather(unit + rank * slice, unit, slice, dtype_of<T>::value, s);
    }

    // Stage 3: all-gather unit u into a vacant slot, on the comm stream (copying
    // this rank's slice up from the host first with offload_param).
    UnitSlot<T>* gather_params(int u) {
        UnitSlot<T>* slot = param_slots->vacant_for(u);
        if (!slot) return nullptr;
        stream_wait(comm_stream, slot->free);
        comm.unit = u;
        size_t slice = plan.slice_numel(u);
        const T* mine = params_shard + plan.shard_offset[u];
        if (offload_param) {
            T* up = param_staging + (slot - param_slots->slots.data()) * plan.largest_slice();
            to_device(up, mine, slice, u);
            mine = up;
        }
        comm.all_gather(mine, slot->ptr, slice, dtype_of<T>::value, comm_stream);
        event_record(slot->ready, comm_stream);
        slot->unit = u;
        mem.set_live(slot->ptr, true);
        return slot;
    }

    // A slot's contents are no longer needed once `s` gets here.
    void vacate(UnitSlot<T>& slot, Stream s) {
        event_record(slot.free, s);
        slot.in_use = false;
        slot.unit = -1;
        mem.set_live(slot.ptr, false);
    }

    // Offload, stages 2-3, micro-steps after the first: copy the reduced slice (in
    // comm_buffer) down to a host staging slice, then add it into the host
    // gradient slice once it is there.
    void accumulate_on_host(T* host_slice, size_t n, int u) {
        int k = next_staging;
        next_staging ^= 1;
        if (staging_used[k]) host_tasks.wait(staging_task[k]);  // its previous slice has been added
        T* staging = host_staging[k];
        to_host(staging, comm_buffer, n, u);
        event_record(staging_ready[k], comm_stream);
        staging_task[k] = host_tasks.submit(staging_ready[k], [=] {
            check_host("a host add", {writes(host_slice, n), reads(staging, n)});
            accumulate_cpu(host_slice, staging, n, false);
        });
        staging_used[k] = true;
    }

    void step_on_device(AdamWStep s, const OptimizerConfig& oc) {
        for (const ShardPiece& p : pieces) {
            s.weight_decay = tensor_has_weight_decay(p.tensor_id) ? oc.weight_decay : 0.0f;
            float *w = master + p.shard_offset, *m = adam_m + p.shard_offset, *v = adam_v + p.shard_offset;
            if (stage < 2) adamw(ctx, w, m, v, grads_full + p.full_offset, own_params(p), p.numel, s, key(p));
            else adamw(ctx, w, m, v, grad_shard + p.shard_offset, own_params(p), p.numel, s, key(p));
        }
        // Whatever the comm stream does next reads what AdamW just wrote: stages 1-2
        // gather the updated slices now, stage 3 gathers params_shard at the next
        // forward. Order it here by event, not by a host sync in the training loop.
        event_record(compute_done, ctx.stream);
        stream_wait(comm_stream, compute_done);
        if (stage == 1 || stage == 2) {
            for (int u = 0; u < plan.num_units(); u++) gather_full_params(u, comm_stream);
            event_record(comm_done, comm_stream);
        }
    }

    // The CPU AdamW, unit by unit; each unit's new parameters go up (and, at
    // stages 1-2, are all-gathered) while the CPU updates the next. Without a
    // host copy of the parameters they go up through two landing slices in
    // turn, the CPU waiting for a slice's last upload before writing it again.
    void step_on_host(AdamWStep s, const OptimizerConfig& oc) {
        size_t next = 0;
        if (!host_grads) grads_down_unit(0);
        for (int u = 0; u < plan.num_units(); u++) {
            const int k = u & 1;
            const T* g = host_grads ? host_grads + plan.shard_offset[u] : grads_down[k];
            if (!host_grads) {  // the next unit's slice goes down while the CPU works on this one
                if (u + 1 < plan.num_units()) grads_down_unit(u + 1);
                event_sync(grads_down_ready[k]);
            }
            T* out = host_params ? host_params + plan.shard_offset[u] : param_landing[k];
            if (!host_params) event_sync(param_landing_read[k]);
            for (; next < pieces.size() && pieces[next].unit == u; next++) {
                const ShardPiece& p = pieces[next];
                const size_t at = p.shard_offset - plan.shard_offset[u];
                cpu_adamw(p, s, oc, g + at, out + at);
            }
            if (offload_param) continue;  // the host slices are the parameters
            upload_unit(u, out);
            if (!host_params) event_record(param_landing_read[k], comm_stream);
        }
        event_record(comm_done, comm_stream);
    }

    // grads_down_in_step: unit u's gradient slice from the device shard down into
    // landing slice u % 2 (whose last reader, the CPU AdamW of unit u - 2, is done).
    void grads_down_unit(int u) {
        to_host(grads_down[u & 1], grad_shard + plan.shard_offset[u], plan.slice_numel(u), u);
        event_record(grads_down_ready[u & 1], comm_stream);
    }

    // The CPU AdamW of one piece, from its host gradients `g`, into master, m, v
    // and its compute-dtype copy `out`.
    void cpu_adamw(const ShardPiece& p, AdamWStep s, const OptimizerConfig& oc, const T* g, T* out) {
        s.weight_decay = tensor_has_weight_decay(p.tensor_id) ? oc.weight_decay : 0.0f;
        size_t o = p.shard_offset;
        check_host("the CPU AdamW", {reads(g, p.numel), writes(master + o, p.numel), writes(adam_m + o, p.numel),
                                     writes(adam_v + o, p.numel), writes(out, p.numel)});
        cpu_adam->step(master + o, adam_m + o, adam_v + o, g, out, p.numel, s, key(p));
    }

    // Unit u's new slice from host memory (`src`) up (stages 1-2: then all-gathered in place).
    void upload_unit(int u, const T* src) {
        size_t slice = plan.slice_numel(u);
        T* dst = stage < 3 ? params_full + plan.full_offset[u] + rank * slice : params_shard + plan.shard_offset[u];
        to_device(dst, src, slice, u);
        if (stage < 3) gather_full_params(u, comm_stream);
    }

    // Delayed update: this step's AdamW on the update thread, once the uploads
    // queued so far have read host_params (which it overwrites); every gradient
    // slice is on the host already (step() synchronised the comm stream). The
    // next step's gradients go to the other host buffer meanwhile.
    void queue_update(AdamWStep s, OptimizerConfig oc) {
        event_record(params_uploaded, comm_stream);
        const T* grads = host_grads;
        delayed->submit(params_uploaded, [this, s, oc, grads] {
            HostClock clock;
            for (const ShardPiece& p : pieces) cpu_adamw(p, s, oc, grads + p.shard_offset, host_params + p.shard_offset);
            delayed_adamw_ms = clock.lap();
        });
        update_pending = true;
        offload_times.delayed = true;
        pending_grads = host_grads;  // live until apply_pending_update
        std::swap(host_grads, host_grads_next);
        host_grads_live = false;
    }

    // Keeps this rank's part of one unit given its full fp32 values.
    void keep_unit(int u, const float* values) {
        size_t F = plan.full_offset[u], P = plan.padded[u], slice = plan.slice_numel(u);
        // fp32 masters of what this rank updates, at their optimizer offsets
        if (stage == 0) copy_to_device(master + F, values, P * sizeof(float));
        else copy_to_device(master + plan.shard_offset[u], values + rank * slice, slice * sizeof(float));
        // compute-dtype copy: the whole unit (stages 0-2) or this rank's slice (stage 3),
        // rounded as a step-0 AdamW would have written it
        size_t begin = stage < 3 ? 0 : rank * slice, n = stage < 3 ? P : slice;
        T* dst = stage < 3 ? params_full + F : params_shard + plan.shard_offset[u];
        write_rounded(dst, values + begin, n, rounding_seed(0), F + key_shift[u] + begin);
    }

    void finish_step() {
        if (grads_live) mem.set_live(grads_full, false);
        if (device_grads_live) mem.set_live(grad_shard, false);
        if (host_grads_live) mem.set_live(host_grads, false);
        grads_live = device_grads_live = host_grads_live = false;
        std::fill(host_norm_taken.begin(), host_norm_taken.end(), 0);
    }
};
