// The step-time model's first half: what one optimizer step of one rank
// executes, as a list of operations in the order the trainer issues them, each
// on the lane it runs on. It walks the same path as train_rank(),
// GPT2::forward/backward (zero/model/gpt2.h) and ZeroEngine's hooks and step()
// (zero/engine/zero_engine.h), with a copy of their decisions: which unit
// stage 3 gathers into which slot and when it prefetches, when a gradient
// slot is free again, what each stage reduces at which micro-step, what
// offload copies where; with a pipeline (q.pp_stage), one stage's slots of
// zero/pipeline/schedule.h with the sends and receives between them
// (zero/pipeline/stage_runner.h) and the tied embeddings' exchange. Test
// perf_trace holds its collectives, sends, receives and host transfers to the
// trainer's own trace (--mem_report 1 -o DIR), entry by entry, rank by rank.
//
// Lanes are the rank's compute stream, its comm stream, its own thread (host),
// its offload worker and its delayed-update thread (the CPU AdamW of
// --offload_delay_steps, which the model takes in its steady state: every
// step waits for the AdamW the step before queued, so step 0 is the trainer's
// step W and step 1 any later one); an op waits for the ops before it on its lane and
// for those in `after` (the engine's events and host syncs). In the CPU build
// every lane is the rank's thread, in program order. zero/perf/simulate.h
// turns the list into a time.
//
//   StepSchedule s = step_schedule(run.memory_query(o), 2);  // two steps: the second is the steady state
//   for (const StepOp& op : s.ops) printf("%s\n", op.key().c_str());
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zero/engine/memory_predictor.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"
#include "zero/pipeline/schedule.h"

enum class Lane : int { Compute, Comm, Host, Worker, Update };

struct StepOp {
    std::string kind;        // a kernel (matmul_fwd, layernorm_bwd, ...), a collective (all_reduce, ...,
                             // scalar), a transfer (to_host, to_device) or host work (cpu_adamw, host_add,
                             // host_sumsq, host_wait: waiting only)
    Lane lane = Lane::Compute;
    std::string group;       // collectives: data or tensor; transfers: host
    uint64_t bytes = 0;      // collectives, transfers: as the trace counts them
    std::vector<long> dims;  // a kernel's shape (its cost key); n elements for elementwise and host work
    int unit = -1;
    int peer = -1;           // a send's or a receive's other stage
    int step = 0;            // which of the simulated steps
    std::vector<int> after;  // earlier ops it waits for, beyond those before it on its lane

    bool collective() const {
        return kind == "all_reduce" || kind == "reduce_scatter" || kind == "all_gather" || kind == "scalar";
    }
    bool transfer() const { return kind == "to_host" || kind == "to_device"; }
    bool p2p() const { return kind == "send" || kind == "recv"; }
    // what the cost table knows it by: "matmul_fwd_f32 256x768x2304x1"
    std::string key() const { return op_key(kind, dims); }
    static std::string op_key(const std::string& kind, const std::vector<long>& dims) {
        std::string k = kind;
        for (size_t i = 0; i < dims.size(); i++) k += (i ? "x" : " ") + std::to_string(dims[i]);
        return k;
    }
};

struct StepSchedule {
    MemoryQuery q;
    std::vector<StepOp> ops;
    size_t tokens_per_step = 0;  // over the data-parallel ranks
};

namespace perf_detail {

// The walk: the model's passes between the engine's hooks, with the engine's
// state (stage 3's parameter slots, stages 2-3's gradient slots, its events);
// with a pipeline, one stage's: its slots of the schedule, the boundary
// tensors to and from its neighbours, the tied embeddings' exchange.
class Walker {
  public:
    explicit Walker(const MemoryQuery& q_)
        : q(q_), layout(q_.cfg, q_.tp, q_.pp_stage), plan(layout.unit_specs(), q_.world, SHARD_ALIGN),
          s((long)q_.dtype_bytes), BT((long)q_.micro_batch * q_.seq_len), C(q_.cfg.channels),
          Cl(q_.cfg.channels / q_.tp), NHl(q_.cfg.num_heads / q_.tp), Vl(q_.cfg.padded_vocab_size / q_.tp),
          R(q_.sp ? BT / q_.tp : BT), st(q_.pp_stage) {
        off_opt = q.offload_optimizer;
        delayed = off_opt && q.offload_delay;
        device_accum = off_opt && q.stage >= 2 && q.offload_grad_accum_device;
        host_grads = off_opt && !(device_accum && !delayed);  // else the shard goes down during the step
        pa = q.tp > 1 && !q.sp && q.recompute == 2 && q.partition_activations;
        pipelined = layout.pipelined(), tied = pipelined && layout.has_embed();
        head_grads = st.first && st.last && q.micro_steps > 1;
        if (st.num_layers < 0) st.num_layers = q.cfg.num_layers;
    }
    std::vector<StepOp> ops;

    void step(int index) {
        cur_step = index;
        if (!pipelined) {
            for (int k = 0; k < q.micro_steps; k++) {
                forward();
                kernel("loss_sum", {BT});  // the step's loss sums, fp32
                backward(k);
            }
        } else {  // this stage's slots, each after the group that sends the last one's result and receives its input
            StageSlots slots = pipeline_schedule(q.gpipe ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB,
                                                 st.stages, q.micro_steps)[st.stage];
            for (size_t k = 0; k <= slots.size(); k++) {
                exchange(k ? &slots[k - 1] : nullptr, k < slots.size() ? &slots[k] : nullptr);
                if (k == slots.size()) break;
                if (slots[k].backward) {
                    backward(slots[k].micro);
                } else {
                    forward();
                    if (st.last) kernel("loss_sum", {BT});
                }
            }
        }
        optimizer_step();
        add_host_wait(last_on(Lane::Compute));  // the loop's stream_sync, then the loss read back
        if (st.last) collective("scalar", "data", 8, -1, Lane::Host);
        if (pipelined) collective("scalar", "pipe", 8, -1, Lane::Host);
    }

  private:
    const MemoryQuery q;
    const ParamLayout layout;
    const ShardPlan plan;
    const long s, BT, C, Cl, NHl, Vl, R;
    StageRange st;
    bool off_opt = false, device_accum = false, host_grads = false, pa = false, pipelined = false, tied = false, head_grads = false;
    bool delayed = false;
    int pending_update = -1;  // the delayed update's last AdamW op, queued by the step before
    int cur_step = 0;
    std::vector<int> token_copies;
    int comm_done = -1;   // the engine's comm_done event: the comm lane's last op when recorded
    bool grads_zeroed = false;
    struct Slot {
        int unit = -1;
        bool in_use = false;
        int ready = -1, free = -1;  // ops: its gather; its last reader
    };
    Slot pslots[3], gslots[3];  // slot 0: unit 0; slots 1-2: the others (zero/engine/unit_slots.h)
    std::vector<int> visits;
    size_t cursor = 0;
    int staging_task[2] = {-1, -1};
    int next_staging = 0;

    // ---- adding ops. The compute stream's event waits (stream_wait) go to its next op.
    std::vector<int> pending_waits;
    void compute_waits(int op) {
        if (op >= 0) pending_waits.push_back(op);
    }
    int add(StepOp op) {
        op.step = cur_step;
        if (op.lane == Lane::Compute) {
            op.after.insert(op.after.end(), pending_waits.begin(), pending_waits.end());
            pending_waits.clear();
        }
        ops.push_back(op);
        return (int)ops.size() - 1;
    }
    int last_on(Lane lane) const {
        for (int i = (int)ops.size() - 1; i >= 0; i--)
            if (ops[i].lane == lane) return i;
        return -1;
    }
    int kernel(const std::string& kind, std::vector<long> dims, Lane lane = Lane::Compute, int unit = -1) {
        StepOp op;
        op.kind = kind, op.dims = dims, op.lane = lane, op.unit = unit;
        return add(op);
    }
    std::string typed(const std::string& kind) const { return kind + (s == 4 ? "_f32" : "_16"); }
    int collective(const std::string& kind, const std::string& group, uint64_t bytes, int unit,
                   Lane lane = Lane::Compute, std::vector<int> after = {}) {
        StepOp op;
        op.kind = kind, op.group = group, op.bytes = bytes, op.unit = unit, op.lane = lane, op.after = after;
        return add(op);
    }
    int p2p(bool send, int peer, uint64_t bytes, int unit, Lane lane = Lane::Compute, std::vector<int> after = {}) {
        int i = collective(send ? "send" : "recv", "pipe", bytes, unit, lane, after);
        ops[i].peer = peer, ops[i].dims = {(long)bytes};
        return i;
    }
    int transfer(const std::string& kind, uint64_t bytes, int unit, Lane lane, std::vector<int> after = {}) {
        StepOp op;
        op.kind = kind, op.group = "host", op.bytes = bytes, op.unit = unit, op.lane = lane, op.after = after;
        op.dims = {(long)bytes};
        return add(op);
    }
    void add_host_wait(int on) {
        if (on < 0) return;
        StepOp op;
        op.kind = "host_wait", op.lane = Lane::Host, op.after = {on};
        add(op);
    }
    int k(const std::string& kind, std::vector<long> dims, int unit) { return kernel(kind, dims, Lane::Compute, unit); }
    int tensor_collective(const std::string& kind, uint64_t bytes, int unit) {  // in the compute stream's order
        return collective(kind, "tensor", bytes, unit, Lane::Compute);
    }

    // ---- the pipeline stage (zero/pipeline/stage_runner.h): what the slot before produced goes to its
    // neighbour, what the next one needs comes from one, as one group on the compute stream
    void exchange(const PipeSlot* prev, const PipeSlot* next) {
        uint64_t b = (uint64_t)R * C * s;
        if (prev && !prev->backward && !st.last) p2p(true, st.stage + 1, b, -1);
        if (prev && prev->backward && !st.first) p2p(true, st.stage - 1, b, -1);
        if (next && !next->backward && !st.first) p2p(false, st.stage - 1, b, -1);
        if (next && next->backward && !st.last) p2p(false, st.stage + 1, b, -1);
    }

    // ---- the engine's hooks (zero_engine.h), stage 3's slots and stages 2-3's gradient slots
    void begin_pass(bool fwd, bool bwd) {
        visits.clear();
        const int lo = layout.has_embed() ? 1 : 0, hi = lo + st.num_layers - 1;
        if (fwd) {
            if (st.first) visits.push_back(0);
            for (int u = lo; u <= hi; u++) visits.push_back(u);
            if (st.last) visits.push_back(layout.final_unit()), visits.push_back(0);
        }
        if (bwd) {
            if (st.last && pipelined) visits.push_back(0);
            if (st.last) visits.push_back(layout.final_unit());
            for (int u = hi; u >= lo; u--) visits.push_back(u);
        }
        cursor = 0;
        compute_waits(comm_done);
    }
    Slot* holding(Slot* slots, int u) {
        for (int i = 0; i < 3; i++)
            if (slots[i].unit == u) return &slots[i];
        return nullptr;
    }
    Slot* vacant(Slot* slots, int u) {
        for (int i = u == 0 ? 0 : 1; i <= (u == 0 ? 0 : 2); i++)
            if (slots[i].unit < 0 && !slots[i].in_use) return &slots[i];
        return nullptr;
    }
    Slot* gather(int u) {
        Slot* slot = vacant(pslots, u);
        if (!slot) return nullptr;
        size_t slice = plan.slice_numel(u);
        std::vector<int> wait = {slot->free};
        if (q.offload_param) wait = {transfer("to_device", slice * s, u, Lane::Comm, wait)};
        slot->ready = collective("all_gather", "data", plan.padded[u] * s, u, Lane::Comm, wait);
        slot->unit = u;
        return slot;
    }
    void acquire_params(int u) {
        cursor++;
        if (q.stage < 3) return;
        Slot* slot = holding(pslots, u);
        if (!slot) slot = gather(u);
        compute_waits(slot->ready);
        slot->in_use = true;
        if (cursor < visits.size() && !holding(pslots, visits[cursor]) && vacant(pslots, visits[cursor]))
            gather(visits[cursor]);
    }
    void release_params(int u) {
        if (q.stage < 3) return;
        Slot* slot = holding(pslots, u);
        slot->free = last_on(Lane::Compute);
        slot->in_use = false, slot->unit = -1;
    }
    void acquire_grads(int u, int micro) {
        if (q.stage < 2) {
            if (micro == 0 && !grads_zeroed) k("zero", {(long)(plan.full_numel * s)}, u), grads_zeroed = true;
            return;
        }
        if (holding(gslots, u)) return;
        Slot* slot = vacant(gslots, u);
        compute_waits(slot->free);
        k("zero", {(long)(plan.padded[u] * s)}, u);
        slot->unit = u, slot->in_use = true;
        // the encoder's last micro-step: the head's wte gradient of the step joins it first
        if (u == 0 && st.first && micro == q.micro_steps - 1 && (pipelined || head_grads)) {
            if (pipelined) p2p(false, st.stages - 1, (uint64_t)Vl * C * s, -1);
            else k("copy", {Vl * C * s}, 0);
        }
    }
    void acquire_head_grads(int micro) {
        if (!head_grads) return acquire_grads(0, micro);
        if (micro == 0) k("zero", {Vl * C * s}, 0);
    }
    void grads_done(int u, int micro) {
        bool last = micro == q.micro_steps - 1;
        if (q.stage < 2 && !last) return;
        if (u == 0 && q.stage < 2 && head_grads) k(typed("accumulate"), {Vl * C}, 0);  // the step's H joins E
        if (u == 0 && q.stage < 2 && tied) return;  // reduced in the step, after the tied all-reduce
        reduce_unit(u, micro, {last_on(Lane::Compute)});
    }
    void reduce_unit(int u, int micro, std::vector<int> after) {  // after: compute_done
        bool last = micro == q.micro_steps - 1;
        size_t slice = plan.slice_numel(u);
        uint64_t unit_bytes = plan.padded[u] * s;
        if (q.stage == 0) {
            collective("all_reduce", "data", unit_bytes, u, Lane::Comm, after);
        } else if (q.stage == 1) {
            collective("reduce_scatter", "data", unit_bytes, u, Lane::Comm, after);
            if (off_opt) transfer("to_host", slice * s, u, Lane::Comm);
        } else {
            collective("reduce_scatter", "data", unit_bytes, u, Lane::Comm, after);
            if (off_opt && !device_accum) {
                if (micro == 0) {
                    transfer("to_host", slice * s, u, Lane::Comm);
                } else {  // a staging slice, then a host add; the thread first waits for that slice's last add
                    int kk = next_staging;
                    next_staging ^= 1;
                    add_host_wait(staging_task[kk]);
                    int copy = transfer("to_host", slice * s, u, Lane::Comm);
                    StepOp add_op;
                    add_op.kind = typed("host_add"), add_op.lane = Lane::Worker, add_op.unit = u;
                    add_op.dims = {(long)slice}, add_op.after = {copy};
                    staging_task[kk] = add(add_op);
                }
            } else {
                kernel(typed("accumulate"), {(long)slice}, Lane::Comm, u);
                if (device_accum && host_grads && last) transfer("to_host", slice * s, u, Lane::Comm);
            }
            Slot* slot = holding(gslots, u);
            slot->free = last_on(Lane::Comm);
            slot->unit = -1, slot->in_use = false;
        }
        if (host_grads && last) {  // the unit's sums of squares, once its final slice is on the host
            StepOp norm;
            norm.kind = typed("host_sumsq"), norm.lane = Lane::Worker, norm.unit = u;
            norm.dims = {(long)unit_norm_numel(u)}, norm.after = {last_on(Lane::Comm)};
            add(norm);
        }
        comm_done = last_on(Lane::Comm);
    }
    size_t unit_norm_numel(int u) const {
        size_t n = 0;
        for (const ShardPiece& p : plan.pieces_of_rank(0))
            if (p.unit == u) n += p.numel;
        return n;
    }
    // the first and last stage's tied embeddings at the step (ZeroEngine::exchange_tied_grads)
    void exchange_tied_grads() {
        std::vector<int> after = {last_on(Lane::Compute)};
        if (q.stage < 2) {
            collective("all_reduce", "tied", plan.padded[0] * s, 0, Lane::Comm, after);
            return reduce_unit(0, q.micro_steps - 1, {});
        }
        if (st.last) {
            p2p(true, 0, (uint64_t)Vl * C * s, 0, Lane::Comm, after);
            Slot* slot = holding(gslots, 0);
            slot->free = last_on(Lane::Comm);
            slot->unit = -1, slot->in_use = false;
        }
        uint64_t bytes = plan.slice_numel(0) * s;
        bool shard = !off_opt || device_accum;
        if (st.first) {
            if (!shard) {  // the slice comes up from the host first
                add_host_wait(last_on(Lane::Comm));
                add_host_wait(last_on(Lane::Worker));
                transfer("to_device", bytes, 0, Lane::Comm, after);
                after.clear();
            }
            p2p(true, st.stages - 1, bytes, 0, Lane::Comm, after);
        } else {
            p2p(false, 0, bytes, 0, Lane::Comm, after);
            if (host_grads) transfer("to_host", bytes, 0, Lane::Comm);
        }
        comm_done = last_on(Lane::Comm);
    }

    // ---- the model (gpt2.h): sequence parallelism's cuts, the tensor group's collectives
    uint64_t act_bytes() const { return (uint64_t)BT * C * s; }
    void tp_reduce(int u) {
        if (q.tp == 1) return;
        tensor_collective(q.sp ? "reduce_scatter" : "all_reduce", act_bytes(), u);
    }
    void tp_gather(int u) {
        if (q.sp) tensor_collective("all_gather", act_bytes(), u);
    }
    void layernorm_backward_rows(int u) {
        if (!q.sp) {
            k(typed("layernorm_bwd"), {R, C}, u);
            return;
        }
        k("zero", {2 * C * s}, u);
        k(typed("layernorm_bwd"), {R, C}, u);
        tensor_collective("all_reduce", 2 * C * s, u);
        k(typed("accumulate"), {C}, u);
        k(typed("accumulate"), {C}, u);
    }
    void layer_forward(int u) {
        k(typed("layernorm_fwd"), {R, C}, u);
        tp_gather(u);
        k(typed("matmul_fwd"), {BT, C, 3 * Cl, 1}, u);
        k(typed("attention_fwd"), {q.micro_batch, q.seq_len, Cl, NHl}, u);
        k(typed("matmul_fwd"), {BT, Cl, C, 1}, u);
        tp_reduce(u);
        k(typed("residual_layernorm_fwd"), {R, C}, u);
        tp_gather(u);
        k(typed("matmul_fwd_gelu"), {BT, C, 4 * Cl, 1}, u);
        k(typed("matmul_fwd"), {BT, 4 * Cl, C, 1}, u);
        tp_reduce(u);
        k(typed("residual_fwd"), {R * C}, u);
    }
    void layer_backward(int u) {
        if (q.recompute == 1) k(typed("gelu_fwd"), {BT * 4 * Cl}, u);
        tp_gather(u);
        k(typed("matmul_bwd_gelu"), {BT, 4 * Cl, C, 1}, u);
        k(typed("matmul_bwd"), {BT, C, 4 * Cl, 1}, u);
        tp_reduce(u);
        layernorm_backward_rows(u);
        tp_gather(u);
        k(typed("matmul_bwd"), {BT, Cl, C, 1}, u);
        k(typed("attention_bwd"), {q.micro_batch, q.seq_len, Cl, NHl}, u);
        k(typed("matmul_bwd"), {BT, C, 3 * Cl, 1}, u);
        tp_reduce(u);
        layernorm_backward_rows(u);
    }
    long kept_rows() const { return pa ? BT / q.tp : R; }
    int layer_unit(int l) const { return layout.layer_unit(st.first_layer + l); }

    void forward() {
        if (st.first || st.last) {  // the tokens go up through a pinned slot, once the copy two uploads ago has landed
            add_host_wait(token_copies.size() >= 2 ? token_copies[token_copies.size() - 2] : -1);
            token_copies.push_back(kernel("upload_tokens", {2 * BT}));
        }
        begin_pass(true, !pipelined);
        if (st.first) {
            acquire_params(0);
            if (q.sp) {
                k(typed("encoder_fwd_vocab"), {q.micro_batch, q.seq_len, C, Vl}, 0);
                tensor_collective("reduce_scatter", act_bytes(), 0);
            } else if (q.tp > 1) {
                k(typed("encoder_fwd_vocab"), {q.micro_batch, q.seq_len, C, Vl}, 0);
                tensor_collective("all_reduce", act_bytes(), 0);
            } else {
                k(typed("encoder_fwd"), {q.micro_batch, q.seq_len, C, q.cfg.padded_vocab_size}, 0);
            }
            release_params(0);
        }
        for (int l = 0; l < st.num_layers; l++) {
            int u = layer_unit(l);
            acquire_params(u);
            layer_forward(u);
            if (q.offload_activations) transfer("to_host", kept_rows() * C * s, u, Lane::Compute);
            else if (pa) k("copy", {kept_rows() * C * s}, u);
            release_params(u);
        }
        if (!st.last) return;
        int uf = layout.final_unit();
        acquire_params(uf);
        k(typed("layernorm_fwd"), {R, C}, uf);
        release_params(uf);
        tp_gather(uf);
        acquire_params(0);
        k(typed("matmul_fwd"), {BT, C, Vl, 0}, 0);
        if (q.tp > 1) {
            k(typed("vocab_local_stats"), {BT, Vl}, 0);
            tensor_collective("all_gather", (uint64_t)q.tp * BT * 4, 0);
            k(typed("vocab_sum_exp"), {BT, Vl, q.tp}, 0);
            tensor_collective("all_reduce", 2 * (uint64_t)BT * 4, 0);
            k(typed("vocab_finish"), {BT, Vl}, 0);
        } else {
            k(typed("classifier"), {BT, q.cfg.padded_vocab_size}, 0);
        }
        if (pipelined) release_params(0);
    }

    void backward(int micro) {
        if (pipelined) begin_pass(false, true);
        if (st.last) {
            if (pipelined) acquire_params(0);
            acquire_head_grads(micro);
            k(typed("matmul_bwd"), {BT, C, Vl, 0}, 0);
            tp_reduce(0);
            release_params(0);
            int uf = layout.final_unit();
            acquire_params(uf);
            acquire_grads(uf, micro);
            k("zero", {BT * C * s}, uf);
            layernorm_backward_rows(uf);
            release_params(uf);
            grads_done(uf, micro);
        } else {
            k("copy", {R * C * s}, -1);  // the received gradient of the stage's output
        }
        for (int l = st.num_layers - 1; l >= 0; l--) {
            int u = layer_unit(l);
            acquire_params(u);
            acquire_grads(u, micro);
            if (q.recompute == 2) {
                if (l > 0 && q.offload_activations) transfer("to_device", kept_rows() * C * s, u, Lane::Compute);
                else if (l > 0 && pa) k("copy", {kept_rows() * C * s}, u);
                if (pa && l > 0) tensor_collective("all_gather", act_bytes(), u);
                layer_forward(u);
            }
            layer_backward(u);
            release_params(u);
            grads_done(u, micro);
        }
        if (!st.first) return;
        acquire_grads(0, micro);
        tp_gather(0);
        if (q.tp > 1) k(typed("encoder_bwd_vocab"), {q.micro_batch, q.seq_len, C, Vl}, 0);
        else k(typed("encoder_bwd"), {q.micro_batch, q.seq_len, C, q.cfg.padded_vocab_size}, 0);
        grads_done(0, micro);
    }

    // The CPU AdamW of unit u's pieces.
    int cpu_adamw(const std::vector<ShardPiece>& pieces, int u, Lane lane, std::vector<int> after) {
        long n = 0;
        for (const ShardPiece& p : pieces)
            if (p.unit == u) n += (long)p.numel;
        StepOp adam;
        adam.kind = typed("cpu_adamw"), adam.lane = lane, adam.unit = u, adam.dims = {n}, adam.after = after;
        return add(adam);
    }

    // ---- ZeroEngine::step()
    void optimizer_step() {
        if (tied) exchange_tied_grads();
        compute_waits(comm_done);
        std::vector<ShardPiece> norm_pieces = plan.pieces_of_rank(0);
        if (off_opt) {
            add_host_wait(last_on(Lane::Comm));    // stream_sync(comm)
            add_host_wait(last_on(Lane::Worker));  // the host adds and the norm's sums of squares
        }
        if (!host_grads) {
            for (const ShardPiece& p : norm_pieces)
                if (!(layout.head_copy() && p.unit == 0)) k(typed("sumsq"), {(long)p.numel}, p.unit);
            add_host_wait(last_on(Lane::Compute));  // the partial sums read back
        }
        for (int k2 = 0; pipelined && k2 < st.stages; k2++) collective("scalar", "pipe", 8, -1, Lane::Host);
        collective("scalar", "data", 8, -1, Lane::Host);
        if (q.tp > 1) collective("scalar", "tensor", 8, -1, Lane::Host);
        std::vector<ShardPiece> pieces = q.stage == 0 ? plan.pieces_full() : norm_pieces;
        if (!off_opt) {
            for (const ShardPiece& p : pieces) k(typed("adamw"), {(long)p.numel}, p.unit);
            int done = last_on(Lane::Compute);
            if (q.stage == 1 || q.stage == 2)
                for (int u = 0; u < plan.num_units(); u++)
                    collective("all_gather", "data", plan.padded[u] * s, u, Lane::Comm, u == 0 ? std::vector<int>{done}
                                                                                                  : std::vector<int>{});
        } else if (!delayed) {
            // each unit's upload (unit u + 2 writes the landing slice it read); with the
            // gradient shard on the device, each unit's slice down, issued while the
            // CPU works on the unit before (which read its landing slice last)
            std::vector<int> up, down, cpu;
            auto grads_down = [&](int u, std::vector<int> after) {
                down.push_back(transfer("to_host", plan.slice_numel(u) * s, u, Lane::Comm, after));
            };
            if (!host_grads) grads_down(0, {});
            for (int u = 0; u < plan.num_units(); u++) {
                std::vector<int> after;
                if (!host_grads) {
                    if (u + 1 < plan.num_units()) grads_down(u + 1, u >= 1 ? std::vector<int>{cpu[u - 1]} : std::vector<int>{});
                    after.push_back(down[u]);
                }
                if (u >= 2 && !q.offload_param) after.push_back(up[u - 2]);
                cpu.push_back(cpu_adamw(pieces, u, Lane::Host, after));
                if (q.offload_param) continue;
                up.push_back(transfer("to_device", plan.slice_numel(u) * s, u, Lane::Comm, {cpu[u]}));
                if (q.stage < 3) collective("all_gather", "data", plan.padded[u] * s, u, Lane::Comm);
            }
        } else {  // the AdamW the last step queued, its parameters up, then this step's AdamW on its thread
            if (pending_update >= 0) {
                add_host_wait(pending_update);
                for (int u = 0; u < plan.num_units(); u++) {
                    transfer("to_device", plan.slice_numel(u) * s, u, Lane::Comm);
                    if (q.stage < 3) collective("all_gather", "data", plan.padded[u] * s, u, Lane::Comm);
                }
            }
            int uploaded = last_on(Lane::Comm);  // (the uploads read host_params, which the AdamW writes)
            for (int u = 0; u < plan.num_units(); u++)
                cpu_adamw(pieces, u, Lane::Update, u == 0 && uploaded >= 0 ? std::vector<int>{uploaded} : std::vector<int>{});
            pending_update = last_on(Lane::Update);
        }
        comm_done = last_on(Lane::Comm);
        grads_zeroed = false;
    }
};

}  // namespace perf_detail

// `steps` consecutive optimizer steps of one rank (ranks of a run differ only
// in which elements their slices hold). Two steps give the second's steady
// state: stages 1-2 all-gather the new parameters while the next step starts.
inline StepSchedule step_schedule(const MemoryQuery& q, int steps = 1) {
    perf_detail::Walker w(q);
    for (int i = 0; i < steps; i++) w.step(i);
    StepSchedule s;
    s.q = q;
    s.ops = std::move(w.ops);
    s.tokens_per_step = (size_t)q.micro_batch * q.seq_len * q.world * q.micro_steps;
    return s;
}
