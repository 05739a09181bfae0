// One optimizer step of one rank, top to bottom: the step's micro-batches
// forward and backward (through the stages in the pipeline schedule's order,
// with --pp), then the engine's step (norm, clip, AdamW, the new parameters'
// gathers), then the loss read back; and the rank's memory at the three
// points the reports show. train_rank() (train_gpt2_zero.cu) runs it on real
// data; a dry run (zero/run/dry_run.h) runs the same function recording
// instead of computing.
#pragma once

#include <vector>

#include "zero/pipeline/stage_runner.h"
#include "zero/run/rank.h"
#include "zero/run/reports.h"

struct StepOutcome {
    StepResult result;  // the gradient norm; skipped (fp16 overflow)
    double loss = 0;    // the step's mean loss over every data-parallel rank
    PhaseMemory live;   // live bytes after the last forward, the last backward, the step
};

template <typename T>
StepOutcome train_step(Rank<T>& r, const std::vector<MicroBatch>& batches, int B, int T_, float lr, float dloss,
                       const OptimizerConfig& oc, float loss_scale, long tokens_per_step) {
    StepOutcome out;
    r.mem.reset_peak();
    r.groups.start_step();
    if (r.pipeline) {
        r.pipeline->train(batches, B, T_, dloss);
        out.live.forward = r.pipeline->live_after_forward, out.live.backward = r.pipeline->live_after_backward;
    } else {
        for (int micro = 0; micro < (int)batches.size(); micro++) {
            r.model.forward(batches[micro].inputs.data(), batches[micro].targets.data(), B, T_, dloss);
            r.model.add_losses(micro == 0);
            out.live.forward = r.mem.live_bytes();
            r.model.backward(micro);
            out.live.backward = r.mem.live_bytes();
        }
    }
    out.result = r.zero.step(lr, oc, loss_scale);
    stream_sync(r.ctx.stream);
    // the last stage's loss sums over the data group (the other stages add zeros)
    double sum = r.model.last ? r.groups.data().sum_scalar(r.model.read_loss_sum(true)) : 0.0;
    out.loss = (r.groups.pipe ? r.groups.pipe->sum_scalar(sum) : sum) / tokens_per_step;
    out.live.step = r.mem.live_bytes();  // (the loss sums read back and let go: model states only)
    return out;
}
