// The dry run (zero/README.md, "The dry run"): a rank built as the trainer
// builds it and train_step() run on it with every operation recorded instead of
// run (zero/base/ops.h): the trainer's own list of operations, the step-time
// model's input, and the rank's memory by phase, exact, at any scale.
//
// record_rank() also takes its real twin, a capture (Recording::Capture), whose
// ops --calibrate replays and --trace writes (zero/run/step_trace.h).
//
// Which ranks: one per pipeline stage, its data and tensor rank 0, stands for
// the stage, whose ranks hold the same bytes and run the same operations up to
// which elements their slices hold and the row-parallel bias only tensor rank 0
// adds. Any rank can be run (the tests run them all).
#pragma once

#include <vector>

#include "zero/base/ops.h"
#include "zero/comm/comm_dry.h"
#include "zero/run/train_step.h"

// One rank's recorded steps.
struct RecordedRank {
    int rank = 0, stage = 0;
    MemoryQuery q;               // its memory query (the predictor's, and the step-time model's)
    std::vector<StepOp> ops;     // its last two steps' operations, steps 0 and 1 (the second: the steady state)
    PhaseMemory live;            // live bytes after forward, backward and the step (the last step)
    MemCounts reserved;          // allocated
    size_t peak[NUM_ARENAS] = {};  // the last step's peak live bytes
};

// Rank `world.rank` built and trained under `rec` (installed on this thread
// for the rank's whole life, so that it knows every buffer, stream and event)
// for as many steps as reach the steady state: two; with a delayed update of
// W steps, W + 2 (the last two both queue an update). Its last two steps are
// kept, numbered 0 and 1; `after_step(r, k)` runs after step k (its ops not kept).
template <typename T, typename AfterStep>
RecordedRank record_rank(const TrainOptions& o, const RunSetup& run, Comm& world, OpRecorder& rec,
                         AfterStep&& after_step) {
    RecordedRank d;
    d.rank = world.rank, d.stage = run.grid().stage(world.rank), d.q = run.memory_query(o, d.stage);
    OpRecorder* outer = tl_recorder;
    tl_recorder = &rec;
    {
        Rank<T> r(o, run, world);
        std::vector<MicroBatch> batches(run.micro_steps);
        const size_t BT = (size_t)o.micro_batch * o.seq_len;
        if (rec.capture) {  // real tokens, different on every rank and micro-step
            r.load_start(run, o.seed);
            for (size_t m = 0; m < batches.size(); m++)
                for (size_t i = 0; i < BT; i++) {
                    batches[m].inputs.push_back((int)((i * 2654435761u + m + world.rank) % run.cfg.vocab_size));
                    batches[m].targets.push_back((int)((i * 40503u + m) % run.cfg.vocab_size));
                }
        } else {  // (a dry run loads nothing: there is nowhere to put it)
            for (MicroBatch& mb : batches) mb.inputs.assign(BT, 0), mb.targets = mb.inputs;
        }
        const long tokens = (long)BT * run.dp * run.micro_steps;
        const int steps = run.offload_delay_steps + 2;
        size_t kept = 0;
        for (int k = 0; k < steps; k++) {
            rec.step = k - (steps - 2);
            if (rec.step == 0) kept = rec.ops.size();
            d.live = train_step(r, batches, o.micro_batch, o.seq_len, rec.capture ? 1e-4f : o.learning_rate,
                                1.0f / tokens, optimizer_config(o), 1.0f, tokens).live;
            const size_t before = rec.ops.size();
            after_step(r, rec.step);
            CHECK(rec.ops.size() == before, "internal: work between recorded steps was recorded");
        }
        if (checking_mode()) check_op_order(rec, world.rank);  // the list's own edges order every access
        d.ops = rec.ops_from(kept);
        d.reserved = r.mem.reserved_bytes();
        for (int a = 0; a < NUM_ARENAS; a++) d.peak[a] = r.mem.peak_live((Arena)a);
    }
    tl_recorder = outer;
    return d;
}

// What a dry run does between its steps: nothing.
struct NothingAfterStep {
    template <typename R>
    void operator()(R&, int) const {}
};

// A dry run's rank in each compute dtype: everything the trainer instantiates
// for one, and so most of a program's compile time. The tests compile them once
// (test/dry_run_instances.cpp) and say ZERO_DRY_RUN_COMPILED_ONCE elsewhere.
#define ZERO_DRY_RUN_RANK(T)                                                                               \
    RecordedRank record_rank<T, NothingAfterStep>(const TrainOptions&, const RunSetup&, Comm&, OpRecorder&, \
                                                  NothingAfterStep&&)
#ifdef ZERO_DRY_RUN_COMPILED_ONCE
extern template ZERO_DRY_RUN_RANK(float);
extern template ZERO_DRY_RUN_RANK(bf16);
extern template ZERO_DRY_RUN_RANK(f16);
#endif

// fn.template operator()<T>() in the run's compute dtype
template <typename Fn>
auto in_dtype(DType dt, Fn&& fn) {
    switch (dt) {
        case DType::BF16: return fn(bf16{});
        case DType::F16: return fn(f16{});
        default: return fn(float{});
    }
}

inline std::vector<RecordedRank> dry_run(const TrainOptions& o, const RunSetup& run, std::vector<int> ranks = {}) {
    if (ranks.empty())  // the ranks that stand for the run: one per pipeline stage (see the header)
        for (int s = 0; s < run.pp; s++) ranks.push_back(run.grid().rank_of(s, 0, 0));
    std::vector<RecordedRank> out;
    for (int rank : ranks)
        out.push_back(in_dtype(run.dtype, [&](auto t) {
            OpRecorder rec(Recording::Dry);
            DryComm world(rank, run.world);
            return record_rank<decltype(t)>(o, run, world, rec, NothingAfterStep{});
        }));
    return out;
}
