// One rank's training machinery, built in the order every rank builds it:
// its process groups (all ranks split together), its memory accountant and
// kernel context, its stage's layout, the ZeRO engine, the model and, with
// pipeline parallelism, its stage's runner; and the memory the predictor says
// it will hold. train_gpt2_zero.cu drives it step by step.
#pragma once

#include <memory>
#include <vector>

#include "kernels/kernels.h"
#include "zero/base/memory.h"
#include "zero/run/groups.h"
#include "zero/run/model_source.h"
#include "zero/engine/memory_predictor.h"
#include "zero/engine/zero_engine.h"
#include "zero/model/gpt2.h"
#include "zero/pipeline/stage_runner.h"
#include "zero/run/run_setup.h"

template <typename T>
struct Rank {
    Rank(const TrainOptions& o, const RunSetup& run, Comm& world)
        : groups(world, run.grid()),
          stage(run.grid().stage(world.rank)),
          mem(world.rank),
          ctx(create_kernel_ctx(mem, (size_t)o.micro_batch * o.seq_len, run.cfg.channels, run.cfg.num_heads,
                                run.cudnn_seq_len(o))),
          layout(run.cfg, run.tp, run.pp > 1 ? run.pipeline.range(stage) : StageRange{}),
          zero(layout, groups.data(), mem, ctx, run.zero_config(o), groups.tensor.get(), groups.pipe.get(),
               groups.tied.get()),
          model(zero, o.micro_batch, o.seq_len, o.recompute, run.offload_activations, mem, run.sp,
                run.pp > 1 ? PipelineStage<T>::activation_slots(run.schedule, run.pp, stage, run.micro_steps) : 1,
                o.partition_activations != 0),
          predicted(predict_memory(run.memory_query(o, stage), SHARD_ALIGN)) {
        if (run.pp > 1) pipeline = std::make_unique<PipelineStage<T>>(model, *groups.pipe, run.schedule, run.micro_steps);
    }
    ~Rank() { destroy_kernel_ctx(ctx); }
    Rank(const Rank&) = delete;
    Rank& operator=(const Rank&) = delete;

    Groups groups;
    const int stage;  // the pipeline stage (0 without one)
    MemoryAccountant mem;
    KernelCtx ctx;
    ParamLayout layout;
    ZeroEngine<T> zero;
    GPT2<T> model;
    std::unique_ptr<PipelineStage<T>> pipeline;  // with --pp > 1
    const MemoryPrediction predicted;

    // The parameters a run starts from: a Hugging Face folder or an llm.c model
    // file (zero/run/model_source.h; each tensor rank cutting its part from the
    // full units), or GPT-2's initialisation from the seed.
    void load_start(const RunSetup& run, uint64_t seed) {
        if (run.hf_dir.empty() && run.model_file.empty()) return zero.init_parameters(seed);
        ModelSource src = run.hf_dir.empty() ? model_file_source(run.model_file) : hf_model_source(run.hf_dir);
        ParamLayout whole = layout.whole_tensors();
        std::vector<float> full_unit;
        zero.load_parameters([&](int u, float* dst) {
            if (run.tp == 1) return src.read_unit(layout, u, dst);
            full_unit.assign(whole.unit_spec(u).numel, 0.0f);
            src.read_unit(whole, u, full_unit.data());
            layout.tp_slice_unit(zero.tp_rank, u, full_unit.data(), dst);
        });
    }
};
