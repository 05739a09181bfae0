// One pipeline stage's share of a step (zero/README.md, "Pipeline stages"):
// its slots of the schedule (zero/pipeline/schedule.h) in order, each
// micro-batch's activations in an activation slot of GPT2's, and the boundary
// tensors to and from the neighbouring stages by point-to-point on the
// pipeline group.
//
// The sends and receives between two slots go in one group, so neighbours
// sending to each other never wait on each other (Megatron's
// send_forward_recv_backward). Micro-batch i's activations live in slot
// i % slots, right only while the stage runs its backwards in the order of its
// forwards and holds at most `slots` micro-batches (in_flight_peak); hold and
// let_go check it, as a broken schedule would silently train on another
// micro-batch's activations. Each slot's own time and its wall-clock start and
// end go to the bubble report (zero/pipeline/bubble.h).
#pragma once

#include <ctime>
#include <vector>

#include "zero/comm/comm.h"
#include "zero/model/gpt2.h"
#include "zero/pipeline/schedule.h"

// One micro-batch's tokens on the host: a stage needs them from its forward to
// its backward (the encoder's backward buckets its rows by token).
struct MicroBatch {
    std::vector<int> inputs, targets;
};

// Sums over the timed steps, per slot of the stage's list (milliseconds).
struct SlotTimes {
    std::vector<double> busy, start, end;  // the slot's own time; its wall-clock start and end from the step's start
    int steps = 0;
};

template <typename T>
class PipelineStage {
  public:
    PipelineStage(GPT2<T>& model_, Comm& pipe_, PipelineSchedule kind_, int micro_steps)
        : model(model_),
          pipe(pipe_),
          s(pipe_.rank),
          slots(pipeline_schedule(kind_, pipe_.world, micro_steps)[pipe_.rank]) {
        CHECK(model.acts.slots >= in_flight_peak(slots), "internal: %d activation slots for %d micro-batches in flight",
              model.acts.slots, in_flight_peak(slots));
        times.busy.assign(slots.size(), 0.0), times.start = times.end = times.busy;
#ifdef ZERO_CUDA
        for (size_t k = 0; k <= 2 * slots.size() && !dry_recorder(); k++) {  // (a dry run times nothing)
            cudaEvent_t e;
            cudaCheck(cudaEventCreate(&e));
            marks.push_back(e);
        }
#endif
    }
    ~PipelineStage() {
#ifdef ZERO_CUDA
        for (cudaEvent_t e : marks) cudaEventDestroy(e);
#endif
    }
    PipelineStage(const PipelineStage&) = delete;
    PipelineStage& operator=(const PipelineStage&) = delete;

    // Activation slots stage s needs: the most micro-batches it holds at once.
    static int activation_slots(PipelineSchedule kind, int P, int s, int m) {
        return in_flight_peak(pipeline_schedule(kind, P, m)[s]);
    }

    // The stage's forwards and backwards of one step (the last stage's losses
    // add up in the model's loss sums), noting the live bytes after its last
    // forward and its last backward (the memory report's phases).
    void train(const std::vector<MicroBatch>& mbs, int B, int seq_len, float dloss) {
        model.set_shape(B, seq_len);
        pipe.barrier();  // one origin for the stages' wall clocks
        step_clock = HostClock();
        mark(0);
        for (size_t k = 0; k <= slots.size(); k++) {
            exchange(k > 0 ? &slots[k - 1] : nullptr, k < slots.size() ? &slots[k] : nullptr);
            if (k == slots.size()) break;
            const PipeSlot& x = slots[k];
            const MicroBatch& mb = mbs[x.micro];
            hold(x.micro);
            double cpu0 = thread_cpu_ms();
            wall[k].start = step_clock.seconds() * 1e3;
            mark(2 * k + 1);
            if (!x.backward) {
                model.forward(mb.inputs.data(), mb.targets.data(), B, seq_len, dloss);
                if (model.last) model.add_losses(x.micro == 0);
                live_after_forward = model.zero.mem.live_bytes();
            } else {
                model.backward(x.micro, mb.inputs.data());
                live_after_backward = model.zero.mem.live_bytes();
                let_go(x.micro);
            }
            mark(2 * k + 2);
            wall[k].end = step_clock.seconds() * 1e3;
            cpu[k] = thread_cpu_ms() - cpu0;
        }
    }

    // After the step's device work is done: add its slot times to `times`.
    void add_step_times() {
        for (size_t k = 0; k < slots.size(); k++) {
#ifdef ZERO_CUDA
            float busy = 0, start = 0, end = 0;
            cudaCheck(cudaEventElapsedTime(&busy, marks[2 * k + 1], marks[2 * k + 2]));
            cudaCheck(cudaEventElapsedTime(&start, marks[0], marks[2 * k + 1]));
            cudaCheck(cudaEventElapsedTime(&end, marks[0], marks[2 * k + 2]));
            times.busy[k] += busy, times.start[k] += start, times.end[k] += end;
#else
            times.busy[k] += cpu[k], times.start[k] += wall[k].start, times.end[k] += wall[k].end;
#endif
        }
        times.steps++;
    }

    // One batch forward through every stage (validation, sampling): from the
    // previous stage, through this one, to the next. The last stage holds the
    // losses (with targets) and the logits.
    void forward_only(const int* inputs, const int* targets, int B, int seq_len) {
        model.set_shape(B, seq_len);
        model.acts.select_slot(0);
        const size_t bytes = model.boundary_elems() * sizeof(T);
        if (!model.first) pipe.recv(model.stage_input(), bytes, s - 1, model.ctx.stream);
        model.forward(inputs, targets, B, seq_len, 0.0f);
        if (!model.last) pipe.send(model.stage_output(), bytes, s + 1, model.ctx.stream);
    }

    GPT2<T>& model;
    Comm& pipe;
    const int s;             // this stage
    const StageSlots slots;  // this stage's part of the schedule
    SlotTimes times;
    MemCounts live_after_forward, live_after_backward;

  private:
    std::vector<SlotSpan> wall = std::vector<SlotSpan>(slots.size());
    std::vector<double> cpu = std::vector<double>(slots.size());
    HostClock step_clock;
#ifdef ZERO_CUDA
    std::vector<cudaEvent_t> marks;  // the step's start, then each slot's start and end, on the compute stream
    void mark(size_t i) {
        if (i < marks.size()) cudaCheck(cudaEventRecord(marks[i], model.ctx.stream));
    }
#else
    void mark(size_t) {}
#endif

    // Micro-batch i's activation slot, selected and checked (see the header):
    // the slot is free or already i's from its receive; after its backward, free.
    std::vector<int> held = std::vector<int>(model.acts.slots, -1);  // the micro-batch in each slot, or -1
    int slot_of(int micro) const { return micro % model.acts.slots; }
    void hold(int micro) {
        const int k = slot_of(micro);
        CHECK(held[k] < 0 || held[k] == micro,
              "internal: micro-batch %d needs activation slot %d, which still holds micro-batch %d's (not yet "
              "backward): the slots must be used first in, first out", micro, k, held[k]);
        held[k] = micro;
        model.acts.select_slot(k);
    }
    void let_go(int micro) {
        const int k = slot_of(micro);
        CHECK(held[k] == micro, "internal: micro-batch %d's backward ran on activation slot %d, which holds %d", micro,
              k, held[k]);
        held[k] = -1;
    }

    static double thread_cpu_ms() {
        timespec t;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
    }

    // What the slot `prev` produced to its neighbour, and what `next` needs
    // from one, as one group (either may be null: the step's first and last).
    void exchange(const PipeSlot* prev, const PipeSlot* next) {
        const size_t bytes = model.boundary_elems() * sizeof(T);
        Stream st = model.ctx.stream;
        at_unit(-1);  // the boundary tensors serve no unit (a recording's label)
        pipe.group_start();
        if (prev && !prev->backward && !model.last) {
            model.acts.select_slot(slot_of(prev->micro));
            pipe.send(model.stage_output(), bytes, s + 1, st);
        }
        const bool grad_sent = prev && prev->backward && !model.first;
        if (grad_sent) pipe.send(model.input_grad(), bytes, s - 1, st);
        if (next && !next->backward && !model.first) {
            hold(next->micro);  // its input lands in its slot
            pipe.recv(model.stage_input(), bytes, s - 1, st);
        }
        // the gradient of the next backward's output arrives in the backward
        // scratch, which held this stage's input gradient for its send since the
        // last backward (GPT2::backward): live while either is there
        const bool grad_received = next && next->backward && !model.last;
        if (grad_received) {
            model.acts.set_scratch_live(true);
            pipe.recv(model.output_grad(), bytes, s + 1, st);
        }
        pipe.group_end();
        if (grad_sent && !grad_received) model.acts.set_scratch_live(false);
    }
};
