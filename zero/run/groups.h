// A rank's process groups in the dp x tp x pp grid, made here and nowhere
// else (the rank order is zero/layout/pipeline_plan.h's: the tensor rank
// fastest, then the data rank, then the stage):
//
//   data    the ranks holding the same part of the model: ZeRO shards across
//           them, and they share the batch and the loss (the world itself
//           without tensor or pipeline parallelism)
//   tensor  tp adjacent ranks: Megatron's tensor parallelism, or none
//   pipe    one rank per stage, of the same (data, tensor) place, or none
//   tied    a pipeline's first and last stage: the tied embeddings, or none
//
// Every rank splits in the same order (the emulated backend and NCCL need
// that); a dry run's rank, alone, is given its place in each group instead
// (zero/comm/comm_dry.h). Each group counts its own bytes.
#pragma once

#include <memory>
#include <vector>

#include "zero/comm/comm.h"
#include "zero/comm/comm_dry.h"
#include "zero/layout/pipeline_plan.h"

struct Groups {
    Groups(Comm& world_, const Grid3& grid) : world(world_) {
        const int rank = world.rank, stage = grid.stage(rank), P = grid.pp, tp = grid.tp;
        const bool end = stage == 0 || stage == P - 1;  // a pipeline's first or last stage
        if (world.dry()) {
            if (tp > 1) tensor = std::make_unique<DryComm>(grid.tp_rank(rank), tp);
            if (tp > 1 || P > 1) data_group = std::make_unique<DryComm>(grid.dp_rank(rank), grid.dp);
            if (P > 1) pipe = std::make_unique<DryComm>(stage, P);
            if (P > 1 && end) tied = std::make_unique<DryComm>(stage == 0 ? 0 : 1, 2);
        } else {
            if (tp > 1) tensor = world.split(rank / tp, grid.tp_rank(rank));
            if (tp > 1 || P > 1) data_group = world.split(stage * tp + grid.tp_rank(rank), grid.dp_rank(rank));
            if (P > 1) {
                const int line = grid.dp_rank(rank) * tp + grid.tp_rank(rank);  // the same (dp, tp) on every stage
                pipe = world.split(line, stage);
                tied = world.split(end ? line : world.world + rank, stage);
                if (!end) tied.reset();
            }
        }
        data().group_name = "data";
        if (tensor) tensor->group_name = "tensor";
        if (pipe) pipe->group_name = "pipe";
        if (tied) tied->group_name = "tied";
    }

    Comm& world;
    std::unique_ptr<Comm> tensor, pipe, tied;  // null where there is no such group

    Comm& data() { return data_group ? *data_group : world; }
    // A new step: counters from zero.
    void start_step() {
        world.stats = CommStats{};
        for (Comm* c : {data_group.get(), tensor.get(), pipe.get(), tied.get()})
            if (c) c->stats = CommStats{};
    }
    // The pipeline's traffic: the stages' sends and receives, and the tied embeddings' all-reduce.
    CommStats pipeline_stats() const {
        CommStats s = pipe ? pipe->stats : CommStats{};
        if (tied) s.add(tied->stats);
        return s;
    }

  private:
    std::unique_ptr<Comm> data_group;  // null when the data group is the world
};
