// The ZeRO engine of one rank: which parameter, gradient and optimizer bytes
// it keeps, and which collective moves which range when. The model calls its
// hooks around each unit and step() once per optimizer step; the stage decides
// what they do, as offset arithmetic on the ShardPlan (zero/README.md: "A worked
// example", "The hooks", "Where it happens"). Offload is offload.h's; tensor
// groups enter only at the initial values and the norm, pipeline stages at the
// norm, the rounding keys and the tied embeddings ("Two slicings", "Pipeline stages").
#pragma once

#include <cmath>
#include <memory>
#include <vector>

#include "kernels/kernels.h"
#include "zero/base/memory.h"
#include "zero/base/rng.h"
#include "zero/comm/comm.h"
#include "zero/engine/offload.h"
#include "zero/engine/rank_state.h"
#include "zero/engine/tied_grads.h"
#include "zero/engine/unit_slots.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/pipeline_plan.h"
#include "zero/layout/shard_plan.h"

struct ZeroConfig {
    int stage = 1;
    int micro_steps = 1;    // gradient accumulation
    OffloadPolicy offload;  // where the states and parameters live (offload.h)
    uint64_t seed = 0;      // stochastic rounding of the bf16 parameter copies
    int cpu_threads = 1;    // the CPU AdamW's threads (offload)
};

struct StepResult {
    float grad_norm;  // of the unscaled gradient, before clipping
    bool skipped;     // a gradient was inf/NaN on some rank: nobody updated
};

template <typename T>
class ZeroEngine : public RankState<T> {
    using State = RankState<T>;

  public:
    using State::layout, State::plan, State::comm, State::mem, State::ctx, State::sharded, State::rank, State::world,
        State::tp_rank, State::adam_t, State::optimizer_numel, State::copy_to_host, State::rounding_seed;

    // comm: the ranks ZeRO shards across (the data group); tensor: the rank's
    // tensor group when layout_.tp > 1, else null; pipe and tied: its pipeline
    // group and its first-and-last-stage pair when layout_ is a stage of
    // several, else null.
    ZeroEngine(const ParamLayout& layout_, Comm& comm_, MemoryAccountant& mem_, const KernelCtx& compute_,
               const ZeroConfig& cfg, Comm* tensor_ = nullptr, Comm* pipe_ = nullptr, Comm* tied_ = nullptr)
        : State(layout_, comm_, mem_, compute_, cfg.stage, cfg.seed, tensor_ ? tensor_->rank : 0, cfg.offload,
                Grid3{comm_.world, layout_.tp, pipe_ ? pipe_->world : 1}.rank_of(pipe_ ? pipe_->rank : 0, comm_.rank,
                                                                                tensor_ ? tensor_->rank : 0)),
          micro_steps(cfg.micro_steps), tensor(tensor_), pipe(pipe_), tied(tied_) {
        CHECK((layout.tp > 1) == (tensor != nullptr) && (!tensor || tensor->world == layout.tp),
              "internal: a tensor-parallel layout needs its tensor group, and only it");
        CHECK(layout.pipelined() == (pipe != nullptr) && (!pipe || pipe->world == layout.stage.stages) &&
                  (!tied || (layout.has_embed() && tied->world == 2)),
              "internal: a pipeline stage's layout needs its pipeline group, and only it");
        const OffloadPolicy& off = cfg.offload;
        const bool states_on_host = off.on_cpu(), params_on_host = off.params == ParamHome::Host;
        CHECK(!states_on_host || sharded.states, "optimizer offload needs ZeRO stage 1, 2 or 3");
        CHECK(!params_on_host || (sharded.params && states_on_host), "parameter offload needs ZeRO stage 3 and optimizer offload");
        CHECK(off.delay_steps == 0 || (states_on_host && !params_on_host),
              "a delayed parameter update needs optimizer offload without parameter offload");
        comm_stream = stream_create(Lane::Comm, "the comm stream");
        compute_done = event_create();
        comm_done = event_create();
        norm_pieces = plan.pieces_of_rank(rank);
        if (states_on_host) {
            std::vector<char> counts;
            for (const ShardPiece& p : norm_pieces) counts.push_back(!counted_elsewhere(p));
            host = std::make_unique<HostOptimizer<T>>(off, *this, micro_steps, norm_pieces, counts, comm_stream,
                                                      cfg.cpu_threads);
        }
        allocate();
        if (!host || !host->grads_on_host())
            norm_partials = (float*)mem.allocate(norm_pieces.size() * sizeof(float), MemKind::Scratch, Arena::Device, "norm_partials", false);
    }
    ~ZeroEngine() {
        host.reset();  // it uses this engine's buffers
        param_slots.reset();
        grad_slots.reset();
        event_destroy(compute_done);
        event_destroy(comm_done);
        stream_destroy(comm_stream);
    }
    ZeroEngine(const ZeroEngine&) = delete;
    ZeroEngine& operator=(const ZeroEngine&) = delete;

    const int micro_steps;
    Comm* const tensor;  // the tensor group, or null
    Comm* const pipe;    // the pipeline group (rank = stage), or null
    Comm* const tied;    // the first and last stage of this rank's pipeline group (stages 0-1's tied all-reduce), or null

    // optimizer offload: the last step's host phases (zeros without offload)
    OffloadTimes offload_times() const { return host ? host->times : OffloadTimes{}; }

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
        stream_wait(ctx.stream, comm_done);  // the previous step's parameter all-gather is complete
    }

    // Unit u's full parameters, ready on the compute stream. Stage 3 gathers
    // them here (unless prefetched) and starts gathering the next unit visited.
    const T* acquire_params(int u) {
        CHECK(cursor < visits.size() && visits[cursor] == u, "internal: model visited unit %d out of order (expected %d)",
              u, cursor < visits.size() ? visits[cursor] : -1);
        cursor++;
        if (!sharded.params) return params_full + plan.full_offset[u];
        UnitSlot<T>* slot = param_slots->holding(u);
        const T* params = use_slot(slot ? slot : gather_params(u), "gather", u);
        if (cursor < visits.size() && !param_slots->holding(visits[cursor]) && param_slots->vacant_for(visits[cursor]))
            gather_params(visits[cursor]);  // prefetch the next visit
        return params;
    }

    void release_params(int u) {
        if (!sharded.params) return;
        UnitSlot<T>* slot = param_slots->holding(u);
        CHECK(slot && slot->in_use, "internal: release of unit %d that is not held", u);
        vacate(*slot, ctx.stream);
    }

    // Drop prefetched units a pass did not use (an evaluation pass stops at the
    // LM head; nothing else should remain).
    void end_pass() {
        if (!sharded.params) return;
        for (auto& s : param_slots->slots)
            if (s.unit >= 0 && !s.in_use) vacate(s, comm_stream);
    }

    // Unit u's full-size gradient buffer to accumulate into, on the compute
    // stream. Asked again within a micro-step (the tied wte) it is the same.
    T* acquire_grads(int u, int micro_step) {
        if (!sharded.grads) {
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
        if (u == layout.embed_unit()) tied_grads.into_fresh_slot(slot->ptr, micro_step);
        return slot->ptr;
    }

    // The LM head's gradient of wte, (Vp/t, C), to accumulate into (tied_grads.h).
    T* acquire_head_grads(int micro_step) { return tied_grads.head_grads(micro_step); }

    // Backward has finished unit u for this micro-step: communicate what the
    // stage says, on the comm stream, once the compute stream gets here.
    void grads_done(int u, int micro_step) {
        bool last = micro_step == micro_steps - 1;
        if (!sharded.grads && !last) return;
        if (u == layout.embed_unit() && !sharded.grads) {
            tied_grads.join_before_reduce(u);  // the step's H joins E
            if (tied) return;                  // reduced in step(), after the tied all-reduce
        }
        event_record(compute_done, ctx.stream);
        stream_wait(comm_stream, compute_done);
        reduce_unit(u, micro_step);
    }

    // ---------------------------------------------------------------------
    // The optimizer step: global norm from the slices, clip, unscale, AdamW on
    // this rank's pieces, then (stages 1, 2) all-gather the new parameters.
    StepResult step(float lr, const OptimizerConfig& oc, float loss_scale) {
        HostClock clock;
        if (tied) tied_grads.exchange();
        stream_wait(ctx.stream, comm_done);             // all gradient collectives are complete
        if (host) host->wait_for_gradients(clock);      // and every slice has arrived on the host
        const double total = global_sum_of_squares(clock);
        const bool overflow = !std::isfinite(total);
        const float grad_norm = overflow ? INFINITY : (float)(std::sqrt(total) / loss_scale);
        StepResult result{grad_norm, overflow};
        apply_pending_update();  // (a skipped step too: the device catches up, nothing new is queued)
        if (overflow) {
            finish_step();
            return result;
        }
        adam_t++;
        const float clip = (oc.grad_clip > 0.0f && grad_norm > oc.grad_clip) ? oc.grad_clip / grad_norm : 1.0f;
        const AdamWStep s = adamw_step(oc, lr, clip / loss_scale, adam_t, rounding_seed(adam_t));
        if (host && host->delays(adam_t)) {
            host->queue_update(s, oc);
        } else if (host) {
            clock.lap();  // (the norm's all-reduce is not the CPU AdamW's)
            step_on_host(s, oc);
            host->times.adamw_ms = clock.lap();
        } else {
            step_on_device(s, oc);
        }
        finish_step();
        return result;
    }

    // Delayed update: waits for the CPU AdamW the last step queued, if any, and
    // sends its parameters up (stages 1-2: each rank's slice, all-gathered;
    // stage 3: the slices, gathered at the next forward). step() calls it; a
    // checkpoint and the end of a run call it so that master, m, v and the
    // device's parameters agree (every rank together: stages 1-2 all-gather).
    void apply_pending_update() {
        if (!host || !host->finish_pending_update()) return;
        for (int u = 0; u < plan.num_units(); u++) upload_unit(u, host->updated_slice(u));
        event_record(comm_done, comm_stream);
    }

    // Stages 0-1: the full gradient buffer (for inspection by tests; valid
    // between backward and step).
    const T* full_gradients() const { return grads_full; }
    // Stages 0-2: the full compute-dtype parameters the next pass computes with
    // (for tests that set them; outside a step, after the comm stream's gathers).
    T* full_parameters() {
        stream_sync(comm_stream);
        return params_full;
    }
    // Unit u's full compute-dtype parameters outside a pass, for a checkpoint or a
    // model file: acquire_params / release_params without the pass's visiting
    // order (stage 3 gathers into a slot; every rank must call this together).
    const T* acquire_params_for_export(int u) {
        if (!sharded.params) {
            stream_wait(ctx.stream, comm_done);  // stages 1-2: peers' slices arrive by the post-step all-gather
            return params_full + plan.full_offset[u];
        }
        return use_slot(gather_params(u), "export", u);
    }
    void release_params_after_export(int u) {
        if (!sharded.params) return;
        vacate(*param_slots->holding(u), ctx.stream);
    }

  private:
    using State::pieces, State::key_shift, State::params_full, State::params_shard, State::master, State::adam_m,
        State::adam_v, State::key, State::own_params, State::gather_full_params;
    Stream comm_stream{};
    Event compute_done{}, comm_done{};
    std::vector<ShardPiece> norm_pieces;  // this rank's slices (for the global norm)
    std::vector<int> visits;
    size_t cursor = 0;
    bool grads_live = false, device_grads_live = false;

    T* grads_full = nullptr;    // stages 0-1: (full_numel)
    T* grad_shard = nullptr;    // stages 2-3 unless the sums are on the host: (shard_numel)
    T* landing = nullptr;       // stages 2-3: the reduce-scatter's landing slice
    float* norm_partials = nullptr;  // the norm's partial sums on the device (where the gradients are)
    std::unique_ptr<UnitSlots<T>> param_slots, grad_slots;
    std::unique_ptr<HostOptimizer<T>> host;  // optimizer offload, or null
    TiedGrads<T> tied_grads{*this};          // the tied embeddings' two gradients
    friend class TiedGrads<T>;

    // The gradient buffers (the parameters and states are RankState's).
    void allocate() {
        const size_t shard = plan.shard_numel, slice = plan.largest_slice();
        const Arena D = Arena::Device;
        if (sharded.params) param_slots = std::make_unique<UnitSlots<T>>(plan, mem, MemKind::Params, "params_gathered");
        if (!sharded.grads) {
            grads_full = (T*)mem.allocate(plan.full_numel * sizeof(T), MemKind::Grads, D, "grads", false);
        } else {
            grad_slots = std::make_unique<UnitSlots<T>>(plan, mem, MemKind::Grads, "grads_unit");
            landing = (T*)mem.allocate(slice * sizeof(T), MemKind::Comm, D, "reduce_scatter_landing", false);
            if (!host || host->sums_on_device())
                grad_shard = (T*)mem.allocate(shard * sizeof(T), MemKind::Grads, D, "grads_shard", false);
        }
    }

    // Unit u's reduction of this micro-step, on the comm stream (grads_done starts
    // it): the stage's collective over the data group, and the slice's way into
    // the gradient shard or down to the host.
    void reduce_unit(int u, int micro_step) {
        const bool last = micro_step == micro_steps - 1;
        const size_t slice = plan.slice_numel(u);
        at_unit(u);
        if (!sharded.states) {  // every rank the whole sum
            comm.all_reduce_sum(grads_full + plan.full_offset[u], plan.padded[u], dtype_of<T>::value, comm_stream);
        } else if (!sharded.grads) {  // each rank its slice's sum, in place in the full buffer
            T* mine = grads_full + plan.full_offset[u] + rank * slice;
            comm.reduce_scatter_sum(mine - rank * slice, mine, slice, dtype_of<T>::value, comm_stream);
            if (host) host->take_reduced(u, mine, true);
        } else {  // the unit's gradient slot, reduce-scattered, added into this rank's slice
            UnitSlot<T>* slot = grad_slots->holding(u);
            CHECK(slot, "internal: gradients of unit %d finished but not held", u);
            comm.reduce_scatter_sum(slot->ptr, landing, slice, dtype_of<T>::value, comm_stream);
            if (host && !host->sums_on_device()) {
                host->take_reduced(u, landing, micro_step == 0);
            } else {
                KernelCtx c = ctx;
                c.stream = comm_stream;
                accumulate(c, grad_shard + plan.shard_offset[u], landing, slice, micro_step == 0);
                if (host && last) host->take_final(u, grad_shard + plan.shard_offset[u]);
            }
            vacate(*slot, comm_stream);
        }
        // gradient bytes held from here to the step: the device shard from the
        // first micro-step, the host sums from their first copy down
        if (grad_shard && !device_grads_live) {
            device_grads_live = true;
            mem.set_live(grad_shard, true);
        }
        if (host) host->grads_arriving(last);
        if (host && last) host->unit_done(u);
        event_record(comm_done, comm_stream);
    }

    // Piece p's summed gradient at the step: in the gradient shard (stages
    // 2-3) or the full buffer (stages 0-1).
    const T* grad_of(const ShardPiece& p) const {
        return sharded.grads ? grad_shard + p.shard_offset : grads_full + p.full_offset;
    }

    // A replicated tensor's gradient is the same on every rank of a tensor group:
    // the norm counts it on the group's rank 0 only; the tied embeddings' on the
    // first pipeline stage only.
    bool counted_elsewhere(const ShardPiece& p) const {
        return (tensor && tp_rank != 0 && layout.tp_replicated(p.tensor_id)) ||
               (layout.head_copy() && p.unit == layout.embed_unit());
    }

    // ZERO_VARIANTS=fused_optimizer (zero/base/variants.h), without optimizer
    // offload: the norm's pieces (this rank's slices, a piece counted
    // elsewhere empty) and AdamW's as tables on the device, made at the first
    // step, one launch each over them; the same bits as piece by piece.
    struct PieceTable {
        std::vector<OptPiece<T>> pieces;
        OptPiece<T>* dev = nullptr;
        unsigned blocks = 0;
    } fused_norm, fused_adamw;
    bool fused() {
        if (host || !variant_on(Variant::FusedOptimizer)) return false;
        if (fused_adamw.dev) return true;
        for (const ShardPiece& p : norm_pieces)
            fused_norm.pieces.push_back({.grad = grad_of(p), .n = counted_elsewhere(p) ? 0 : p.numel});
        for (const ShardPiece& p : pieces)
            fused_adamw.pieces.push_back({.grad = grad_of(p), .param = own_params(p), .states = p.shard_offset,
                                          .n = p.numel, .key = key(p), .decay = tensor_has_weight_decay(p.tensor_id)});
        for (PieceTable* t : {&fused_norm, &fused_adamw}) {
            t->blocks = lay_out_pieces(t->pieces, t == &fused_norm, master, adam_m, adam_v);
            const size_t bytes = t->pieces.size() * sizeof(OptPiece<T>);
            t->dev = (OptPiece<T>*)mem.allocate(bytes, MemKind::Scratch, Arena::Device, "optimizer_pieces", false);
            State::copy_to_device(t->dev, t->pieces.data(), bytes);
        }
        return true;
    }

    // The global gradient norm's square (scaled by the loss scale): sums of squares over
    // the slices this rank owns, in every stage (stage 0 too), so the norm has
    // the same bits whatever the stage; from the host's partial sums with
    // offload (taken as each unit's slice landed), else on the device. In the
    // order of the whole model's units: a pipeline stage continues the sum of
    // the stages before it (a scalar reduction per stage, the others adding
    // zeros), so every stage ends with one rank's sum. Non-finite if any rank
    // saw inf/NaN.
    double global_sum_of_squares(HostClock& clock) {
        std::vector<float> partials(norm_pieces.size());
        if (host && host->grads_on_host()) {
            partials = host->norm_partials(clock);
        } else {
            if (fused())  // every piece in two launches (the pieces counted elsewhere have n = 0)
                sumsq_pieces(ctx, norm_partials, fused_norm.dev, fused_norm.pieces, fused_norm.blocks);
            else
                for (size_t i = 0; i < norm_pieces.size(); i++)
                    if (!counted_elsewhere(norm_pieces[i]))
                        sumsq(ctx, norm_partials + i, grad_of(norm_pieces[i]), norm_pieces[i].numel);
            copy_to_host(partials.data(), norm_partials, partials.size() * sizeof(float));
        }
        double local = 0.0;
        const int stages = pipe ? pipe->world : 1, my_stage = pipe ? pipe->rank : 0;
        for (int st = 0; st < stages; st++) {
            if (st == my_stage)
                for (size_t i = 0; i < partials.size(); i++)
                    if (!counted_elsewhere(norm_pieces[i])) local += partials[i];
            if (pipe) local = pipe->sum_scalar(st == my_stage ? local : 0.0);
        }
        double total = comm.sum_scalar(local);
        if (tensor) total = tensor->sum_scalar(total);  // the tensor group's parts
        return total;
    }

    // Stage 3: all-gather unit u into a vacant slot, on the comm stream (its
    // slice first up from the host with parameter offload).
    UnitSlot<T>* gather_params(int u) {
        UnitSlot<T>* slot = param_slots->vacant_for(u);
        if (!slot) return nullptr;
        stream_wait(comm_stream, slot->free);
        const int outer = tl_recorder ? tl_recorder->unit : -1;  // (a prefetch's unit is not its caller's)
        at_unit(u);
        size_t slice = plan.slice_numel(u);
        const T* mine = params_shard + plan.shard_offset[u];
        if (host && host->params_up == ParamsUp::Gathered) mine = host->slice_up(u, (int)(slot - param_slots->slots.data()));
        comm.all_gather(mine, slot->ptr, slice, dtype_of<T>::value, comm_stream);
        event_record(slot->ready, comm_stream);
        slot->unit = u;
        mem.set_live(slot->ptr, true);
        at_unit(outer);
        return slot;
    }

    // Stage 3: unit u's gathered parameters in `slot` (null: none was free to `what` it
    // into), handed out on the compute stream.
    const T* use_slot(UnitSlot<T>* slot, const char* what, int u) {
        CHECK(slot, "internal: no free slot to %s unit %d", what, u);
        stream_wait(ctx.stream, slot->ready);
        slot->in_use = true;
        return slot->ptr;
    }

    // A slot's contents are no longer needed once `s` gets here.
    void vacate(UnitSlot<T>& slot, Stream s) {
        event_record(slot.free, s);
        slot.in_use = false;
        slot.unit = -1;
        mem.set_live(slot.ptr, false);
    }

    void step_on_device(AdamWStep s, const OptimizerConfig& oc) {
        if (fused()) {  // every piece in one launch
            s.weight_decay = oc.weight_decay;
            adamw_pieces(ctx, fused_adamw.dev, fused_adamw.pieces, fused_adamw.blocks, master, adam_m, adam_v, s);
        } else {
            for (const ShardPiece& p : pieces) {
                s.weight_decay = tensor_has_weight_decay(p.tensor_id) ? oc.weight_decay : 0.0f;
                const size_t o = p.shard_offset;
                adamw(ctx, master + o, adam_m + o, adam_v + o, grad_of(p), own_params(p), p.numel, s, key(p));
            }
        }
        // Whatever the comm stream does next reads what AdamW just wrote: stages 1-2
        // gather the updated slices now, stage 3 gathers params_shard at the next
        // forward. Order it here by event, not by a host sync in the training loop.
        event_record(compute_done, ctx.stream);
        stream_wait(comm_stream, compute_done);
        if (sharded.states && !sharded.params) {  // (whole parameters, updated a slice per rank)
            for (int u = 0; u < plan.num_units(); u++) gather_full_params(u, comm_stream);
            event_record(comm_done, comm_stream);
        }
    }

    // The CPU AdamW, unit by unit; each unit's new parameters go up (and, at
    // stages 1-2, are all-gathered) while the CPU updates the next.
    void step_on_host(const AdamWStep& s, const OptimizerConfig& oc) {
        for (int u = 0; u < plan.num_units(); u++) {
            const T* updated = host->update_unit(u, s, oc, grad_shard);
            if (host->params_up == ParamsUp::Gathered) continue;  // the host slices are the parameters
            upload_unit(u, updated);
            host->uploaded(u);
        }
        event_record(comm_done, comm_stream);
    }

    // Unit u's new slice from host memory (`src`) up (stages 1-2: then all-gathered in place).
    void upload_unit(int u, const T* src) {
        size_t slice = plan.slice_numel(u);
        T* dst = sharded.params ? params_shard + plan.shard_offset[u] : params_full + plan.full_offset[u] + rank * slice;
        host->to_device(dst, src, slice, u);
        if (!sharded.params) gather_full_params(u, comm_stream);
    }

    void finish_step() {
        if (grads_live) mem.set_live(grads_full, false);
        if (device_grads_live) mem.set_live(grad_shard, false);
        grads_live = device_grads_live = false;
        if (host) host->finish_step();
    }
};
