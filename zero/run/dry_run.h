// The dry run (zero/README.md, "The dry run"): a rank built as the trainer
// builds it and train_step() run on it, with every kernel, copy, collective
// and piece of host work recorded instead of run and the accountant handing
// out addresses that hold nothing (zero/base/ops.h). What comes out is the
// trainer's own list of operations -- the step-time model's input -- and the
// rank's memory by phase, exact, at any scale: no parameter, gradient or
// activation byte exists and no data is read.
//
// Which ranks: the ranks of one pipeline stage hold the same bytes (equal
// slices of equal units; a tensor rank's units are all alike) and run the
// same operations, up to which elements their slices hold (how many pieces
// their per-piece kernels take) and a row-parallel bias only tensor rank 0
// adds; so one rank per stage, its data and tensor rank 0, stands for the
// stage. Any rank can be run (the tests run them all).
#pragma once

#include <vector>

#include "zero/base/ops.h"
#include "zero/comm/comm_dry.h"
#include "zero/run/train_step.h"

struct DryRank {
    int rank = 0, stage = 0;
    MemoryQuery q;               // its memory query (the predictor's, and the step-time model's)
    std::vector<StepOp> ops;     // its last two steps' operations, steps 0 and 1 (the second: the steady state)
    PhaseMemory live;            // live bytes after forward, backward and the step (the last step)
    MemCounts reserved;          // allocated
    size_t peak[NUM_ARENAS] = {};  // the last step's peak live bytes
    Trace trace;                 // the last step's collectives and host transfers
};

// One rank's dry run: as many steps as reach the steady state (two; with a
// delayed update of W steps, W + 2: the last two both queue an update).
template <typename T>
DryRank dry_run_rank(const TrainOptions& o, const RunSetup& run, int rank) {
    DryRank d;
    d.rank = rank, d.stage = run.grid().stage(rank), d.q = run.memory_query(o, d.stage);
    OpRecorder rec;
    OpRecorder* outer = tl_recorder;
    tl_recorder = &rec;
    {
        DryComm world(rank, run.world);
        Rank<T> r(o, run, world);  // no parameters loaded: there is nowhere to put them
        std::vector<MicroBatch> batches(run.micro_steps);
        for (MicroBatch& mb : batches) mb.inputs.assign((size_t)o.micro_batch * o.seq_len, 0), mb.targets = mb.inputs;
        const long tokens = (long)o.micro_batch * o.seq_len * run.dp * run.micro_steps;
        const int steps = run.offload_delay_steps + 2;
        size_t kept = 0;
        for (int k = 0; k < steps; k++) {
            rec.step = k - (steps - 2);
            if (rec.step == 0) kept = rec.ops.size();
            d.live = train_step(r, batches, o.micro_batch, o.seq_len, o.learning_rate, 1.0f / tokens,
                                optimizer_config(o), 1.0f, tokens).live;
        }
        if (checking_mode()) check_op_order(rec, rank);  // the list's own edges order every access
        for (size_t i = kept; i < rec.ops.size(); i++) {  // the kept steps, numbered from 0
            StepOp op = rec.ops[i];
            std::vector<int> after;
            for (int a : op.after)
                if (a >= (int)kept) after.push_back(a - (int)kept);  // (an earlier step's op: done already)
            op.after = after;
            d.ops.push_back(op);
        }
        d.reserved = r.mem.reserved_bytes();
        for (int a = 0; a < NUM_ARENAS; a++) d.peak[a] = r.mem.peak_live((Arena)a);
        d.trace = r.groups.trace;
    }
    tl_recorder = outer;
    return d;
}

// The ranks that stand for the run: one per pipeline stage (see the header).
inline std::vector<int> dry_run_ranks(const RunSetup& run) {
    std::vector<int> ranks;
    for (int s = 0; s < run.pp; s++) ranks.push_back(run.grid().rank_of(s, 0, 0));
    return ranks;
}

inline std::vector<DryRank> dry_run(const TrainOptions& o, const RunSetup& run, std::vector<int> ranks = {}) {
    if (ranks.empty()) ranks = dry_run_ranks(run);
    std::vector<DryRank> out;
    for (int rank : ranks) switch (run.dtype) {
            case DType::F32: out.push_back(dry_run_rank<float>(o, run, rank)); break;
            case DType::BF16: out.push_back(dry_run_rank<bf16>(o, run, rank)); break;
            case DType::F16: out.push_back(dry_run_rank<f16>(o, run, rank)); break;
        }
    return out;
}
