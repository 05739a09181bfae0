// The tied embeddings' two gradients: wte is both the encoder's table and the
// LM head's weight, so a step has the head's gradient H and the encoder's E,
// which accumulate apart over the micro-steps and meet once per step, in the
// same order whether one rank holds both ends or a pipeline's first and last
// stage do (zero/README.md, "Pipeline stages"). The engine calls these from
// its hooks and its step; they are its own code, kept here apart from the
// stages' (hence the engine's private members through `z`).
#pragma once

#include "kernels/kernels.h"
#include "zero/engine/unit_slots.h"

template <typename T>
class ZeroEngine;

template <typename T>
class TiedGrads {
  public:
    // A rank holding both ends keeps H in a buffer of its own when it
    // accumulates micro-steps; otherwise H goes straight into unit 0's gradient.
    explicit TiedGrads(ZeroEngine<T>& z_) : z(z_) {
        if (z.layout.stage.first && z.layout.stage.last && z.micro_steps > 1)
            head = (T*)z.mem.allocate(z.layout.numel(WTE) * sizeof(T), MemKind::Grads, Arena::Device, "grads_lm_head", false);
    }

    // Where the LM head accumulates its gradient of wte, (Vp/t, C): its own
    // buffer, else unit 0's gradient (on the last stage its copy's, kept over the step).
    T* head_grads(int micro_step) {
        if (!head) return z.acquire_grads(z.layout.embed_unit(), micro_step) + z.layout.offset_in_unit(WTE);
        if (micro_step == 0) {
            device_zero(head, z.layout.numel(WTE) * sizeof(T), z.ctx.stream);
            z.mem.set_live(head, true);
        }
        return head;
    }

    // Stages 2-3 reduce unit 0 every micro-step: at the encoder's last one, the
    // step's H goes into unit 0's fresh gradient slot first, and the encoder
    // then adds its E (H + E): from the last stage (exchange() sends it), or
    // from this rank's buffer.
    void into_fresh_slot(T* unit0, int micro_step) {
        const bool needs_h = z.layout.stage.first && micro_step == z.micro_steps - 1 && (z.pipe || head);
        if (!needs_h) return;
        T* dwte = unit0 + z.layout.offset_in_unit(WTE);
        const size_t n = z.layout.numel(WTE);
        if (z.pipe) return z.pipe->recv(dwte, n * sizeof(T), z.pipe->world - 1, z.ctx.stream);
        device_copy(dwte, head, n * sizeof(T), z.ctx.stream);
        z.mem.set_live(head, false);
    }

    // Stages 0-1 reduce unit 0 once, at the last micro-step: H joins E first
    // (on a rank holding both ends).
    void join_before_reduce(int u) {
        if (!head) return;
        accumulate(z.ctx, z.grads_full + z.plan.full_offset[u] + z.layout.offset_in_unit(WTE), head,
                   z.layout.numel(WTE), false);
        z.mem.set_live(head, false);
    }

    // Pipelined, on the first and the last stage, at the step: stages 0-1
    // all-reduce unit 0's gradient between the two (E + H on both), then each
    // reduces it over its data group; at stages 2-3 the last stage sends H to
    // the first (which receives it in its last micro-step: into_fresh_slot),
    // and the first sends its reduced slice of unit 0 back.
    void exchange() {
        const int u = z.layout.embed_unit(), first = 0, last = z.pipe->world - 1;
        const Stream s = z.comm_stream;
        at_unit(u);
        event_record(z.compute_done, z.ctx.stream);
        stream_wait(s, z.compute_done);
        if (!z.sharded.grads) {
            z.tied->all_reduce_sum(z.grads_full + z.plan.full_offset[u], z.plan.padded[u], dtype_of<T>::value, s);
            return z.reduce_unit(u, z.micro_steps - 1);
        }
        if (z.layout.stage.last) {
            UnitSlot<T>* slot = z.grad_slots->holding(u);
            CHECK(slot, "internal: the LM head's gradient is not held");
            z.pipe->send(slot->ptr + z.layout.offset_in_unit(WTE), z.layout.numel(WTE) * sizeof(T), first, s);
            z.vacate(*slot, s);
        }
        // where the slices add up on the host, through the device's landing slice
        const size_t bytes = z.plan.slice_numel(u) * sizeof(T);
        T* slice = z.grad_shard ? z.grad_shard + z.plan.shard_offset[u] : z.landing;
        if (z.layout.stage.first) {
            if (!z.grad_shard) z.host->sums_up(u, slice);
            z.pipe->send(slice, bytes, last, s);
        } else {
            z.pipe->recv(slice, bytes, first, s);
            if (z.host) z.host->received(u, slice);
        }
        event_record(z.comm_done, s);
    }

  private:
    ZeroEngine<T>& z;
    T* head = nullptr;  // (Vp/t, C): H over the step's micro-steps, on a rank holding both ends
};
