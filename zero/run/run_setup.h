// Turns the flags into a checked run description before anything is allocated:
// model shape, compute dtype, world size, gradient accumulation. Every
// impossible combination is a one-line error here, not a crash later.
#pragma once

#include <string>

#include "zero/base/common.h"
#include "zero/base/dtype.h"
#include "zero/run/flags.h"
#include "zero/layout/gpt2_config.h"
#include "zero/comm/launcher.h"
#include "zero/engine/loss_scaler.h"
#include "zero/engine/memory_predictor.h"
#include "zero/layout/hf_gpt2.h"
#include "zero/layout/model_file.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/pipeline_plan.h"
#include "zero/layout/shard_plan.h"
#include "zero/layout/tp_plan.h"
#include "kernels/kernels.h"
#include "zero/engine/zero_engine.h"
#include "zero/pipeline/schedule.h"

#include <unistd.h>
#include <algorithm>
#include <cmath>

// The threads this process may use: OMP_NUM_THREADS when set (its first
// number, as OpenMP reads it), else every online core.
inline int process_cpu_threads() {
    const char* env = getenv("OMP_NUM_THREADS");
    if (env && *env) {
        char* end = nullptr;
        long v = strtol(env, &end, 10);
        CHECK(v >= 1 && v <= 65536 && (*end == '\0' || *end == ','),
              "OMP_NUM_THREADS=%s: expected a positive number of threads", env);
        return (int)v;
    }
    return (int)std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

struct RunSetup {
    GPT2Config cfg;
    std::string model_file;  // empty: initialise from the seed
    std::string hf_dir;      // or start from this Hugging Face folder
    DType dtype = DType::F32;
    int world = 1;              // ranks in the job
    int tp = 1, dp = 1, pp = 1;  // the grid: world = dp x tp x pp (zero/layout/pipeline_plan.h's rank order)
    bool sp = false;            // sequence parallelism in the tensor groups
    PipelinePlan pipeline;      // the layers of each pipeline stage
    PipelineSchedule schedule = PipelineSchedule::OneFOneB;
    int ranks_per_process = 1;  // emulated ranks share this process's cores
    int micro_steps = 1;        // gradient accumulation
    bool offload_optimizer = false, offload_param = false, offload_activations = false;
    bool nvme = false;         // --offload_optimizer nvme: the states' share nvme_fraction on disk
    double nvme_fraction = 1;
    DiskConfig disk;           // its directory and pipeline
    size_t nvme_tile_numel = 0;  // elements of a tile
    bool offload_grad_accum_device = false;  // --offload_grad_accum device
    int offload_delay_steps = 0;             // --offload_delay_steps
    bool cudnn_attention = false;            // --attention cudnn
    LaunchEnv launch;

    Grid3 grid() const { return Grid3{dp, tp, pp}; }

    // One rank's prediction: of pipeline stage `stage` (every rank alike without a pipeline).
    MemoryQuery memory_query(const TrainOptions& o, int stage = 0) const {
        MemoryQuery q{.cfg = cfg, .stage = o.zero_stage, .world = dp, .tp = tp, .sp = sp, .dtype_bytes = dtype_size(dtype),
                      .micro_batch = o.micro_batch, .seq_len = o.seq_len, .recompute = o.recompute,
                      .micro_steps = micro_steps, .offload_optimizer = offload_optimizer, .offload_param = offload_param,
                      .offload_nvme = nvme, .nvme_fraction = nvme_fraction, .nvme_buffers = disk.buffers,
                      .nvme_tile_numel = nvme_tile_numel, .offload_grad_accum_device = offload_grad_accum_device,
                      .offload_delay = offload_delay_steps > 0, .offload_activations = offload_activations,
                      .partition_activations = o.partition_activations != 0,
                      .kernel_workspace_bytes = kernel_workspace_bytes(o.micro_batch * o.seq_len, cfg.channels,
                                                                       cfg.num_heads, cudnn_seq_len(o))};
        if (pp > 1) q.pp_stage = pipeline.range(stage), q.pp_layers = pipeline.layers;
        q.gpipe = schedule == PipelineSchedule::GPipe;
        return q;
    }
    ZeroConfig zero_config(const TrainOptions& o) const {
        const OffloadPolicy offload{
            .states = nvme ? StateHome::Disk : offload_optimizer ? StateHome::Host : StateHome::Device, .disk = disk,
            .disk_fraction = nvme_fraction, .disk_tile_numel = nvme_tile_numel,
            .params = offload_param ? ParamHome::Host : ParamHome::Device,
            .sums = offload_grad_accum_device ? GradSums::Device : GradSums::Host, .delay_steps = offload_delay_steps};
        return {.stage = o.zero_stage, .micro_steps = micro_steps, .offload = offload, .seed = o.seed,
                .cpu_threads = cpu_threads_per_rank()};
    }
    // kernel_workspace_bytes's and create_kernel_ctx's: the sequence length when the attention is cuDNN's, else 0
    int cudnn_seq_len(const TrainOptions& o) const { return cudnn_attention ? o.seq_len : 0; }
    // the threads of this process, shared by the ranks it runs
    int cpu_threads_per_rank() const { return std::max(1, process_cpu_threads() / ranks_per_process); }
};

// The run header's line on where an offloaded run's gradients add up between
// micro-steps; empty without optimizer offload.
inline std::string offload_grad_accum_text(const TrainOptions& o, const RunSetup& r) {
    if (!r.offload_optimizer) return "";
    std::string s = "optimizer offload: ";
    if (o.zero_stage < 2)
        return s + "gradients accumulate on the device (stage 1's full buffer); its slices go to the host once per step";
    if (r.offload_grad_accum_device)
        return s + "gradients add up in a device shard (--offload_grad_accum device); each unit's slice goes to the "
                   "host " + (o.offload_delay_steps > 0 ? "at the last micro-step" : "during the step, ahead of its CPU AdamW");
    if (r.micro_steps == 1) return s + "one micro-step: each reduced gradient slice goes straight to the host";
    return s + "gradients accumulate on the host (--offload_grad_accum host); every micro-step's slices go down";
}

// The run header's line on the delayed parameter update; empty without it.
inline std::string offload_delay_text(const RunSetup& r) {
    if (r.offload_delay_steps == 0) return "";
    return "delayed parameter update (--offload_delay_steps " + std::to_string(r.offload_delay_steps) + "): after " +
           std::to_string(r.offload_delay_steps) +
           " step(s) each step's CPU AdamW runs during the next, which computes on the parameters one update behind";
}

// The engine's other configs, straight from the options (whose defaults are the
// only ones: zero/run/options.h).
inline LossScalerConfig loss_scaler_config(const TrainOptions& o) {
    return {.static_scale = o.loss_scale, .initial_scale_power = o.initial_scale_power, .window = o.loss_scale_window,
            .hysteresis = o.hysteresis, .min_scale = o.min_loss_scale};
}

inline OptimizerConfig optimizer_config(const TrainOptions& o) {
    return {.beta1 = o.adam_beta1, .beta2 = o.adam_beta2, .eps = o.adam_eps, .weight_decay = o.weight_decay,
            .grad_clip = o.grad_clip, .bias_correction = o.adam_bias_correction != 0};
}

// The learning rate of optimizer step `step` (from 0) of a run of total_steps. cosine: linear warmup, lr x
// (step + 1) / -u, then cosine decay to -q x lr at the run's end. DeepSpeed's: its scheduler moves after each
// step, so step s runs at its iteration i = s - 1 (-1: warmup_min_lr; WarmupCosineLR 0). Warmup from start =
// --warmup_min_ratio x lr over W = max(2, -u), by ln(i + 1) / ln(W) (log) or i / W; then WarmupLR holds lr,
// WarmupDecayLR falls linearly back to start at --total_num_steps, WarmupCosineLR on a cosine to -q x lr.
inline float learning_rate_at(const TrainOptions& o, int step, int total_steps) {
    const float lr = o.learning_rate;
    if (o.lr_schedule == "cosine") {
        if (step < o.warmup_steps) return lr * (step + 1) / o.warmup_steps;
        float min_lr = lr * o.final_lr_frac;
        int decay_steps = std::max(1, total_steps - o.warmup_steps);
        float ratio = std::min(1.0f, (float)(step - o.warmup_steps) / decay_steps);
        return min_lr + 0.5f * (1.0f + cosf((float)M_PI * ratio)) * (lr - min_lr);
    }
    const int i = step - 1, warmup = std::max(2, o.warmup_steps);
    const double start = (double)lr * o.warmup_min_ratio, end = o.total_num_steps > 0 ? o.total_num_steps : total_steps;
    if (i < 0) return o.lr_schedule == "WarmupCosineLR" ? 0.0f : (float)start;
    const double warm = o.warmup_type == "log" ? std::log(i + 1.0) / std::log(warmup) : (double)i / warmup;
    if (i < warmup) return (float)(start + (lr - start) * warm);
    const double decay_steps = std::max(1.0, end - warmup), end_frac = o.final_lr_frac;
    if (o.lr_schedule == "WarmupLR") return lr;
    if (o.lr_schedule == "WarmupDecayLR") return (float)(start + (lr - start) * std::max(0.0, (end - i) / decay_steps));
    const double progress = std::min(1.0, (i - warmup + 1) / decay_steps);
    return (float)(lr * std::max(0.0, end_frac + (1.0 - end_frac) * 0.5 * (1.0 + std::cos(M_PI * progress))));
}

inline DType parse_precision(const std::string& p) {
#ifdef ZERO_CUDA
    if (p.empty()) return DType::BF16;
#else
    if (p.empty()) return DType::F32;
#endif
    if (p == "fp32") return DType::F32;
    if (p == "bf16") return DType::BF16;
    if (p == "fp16") return DType::F16;
    fail("--precision must be fp32, bf16 or fp16 (got '%s')", p.c_str());
}

inline bool parse_offload(const std::string& v, const char* flag) {
    if (v == "none") return false;
    if (v == "cpu") return true;
    CHECK(v != "nvme" || strcmp(flag, "--offload_optimizer") == 0,
          "%s nvme: stage 3's parameter slices are read by every forward and backward pass, so they stay in host "
          "memory (--offload_param cpu), beside optimizer states on disk (--offload_optimizer nvme)", flag);
    if (v == "nvme") return true;
    fail("%s must be none, cpu or nvme (got '%s')", flag, v.c_str());
}

// A check's answer: empty, or its one-line error.
inline void check_no_error(const std::string& err) { CHECK(err.empty(), "%s", err.c_str()); }

inline RunSetup make_run_setup(const TrainOptions& o) {
    RunSetup r;
    // the model: a descriptor or shape, or a file or Hugging Face folder to start from
    if (!o.from_hf.empty()) {
        r.cfg = HfGpt2Reader(o.from_hf).cfg;  // checks every tensor, reads none
        r.hf_dir = o.from_hf;
    } else if (file_exists(o.model)) {
        ModelFile mf(o.model);
        r.cfg = mf.cfg;
        r.model_file = o.model;
    } else {
        CHECK(o.model.find('/') == std::string::npos && o.model.find(".bin") == std::string::npos,
              "model file %s does not exist", o.model.c_str());
        r.cfg = gpt2_config_from_descriptor(o.model);
    }
    r.dtype = parse_precision(o.precision);

    // the world
    r.launch = detect_launch_env();
    CHECK(o.ranks >= 1, "--ranks must be at least 1 (got %d)", o.ranks);
    if (r.launch.world > 1) {
#ifndef ZERO_CUDA
        fail("launched as %d processes (%s), but the CPU build runs ranks only as threads: use --ranks N",
             r.launch.world, r.launch.source.c_str());
#endif
        CHECK(o.ranks == 1, "--ranks emulates ranks inside one process; under a launcher (%s) every process is "
              "already one rank", r.launch.source.c_str());
        r.world = r.launch.world;
    } else {
        r.world = o.ranks;
        r.ranks_per_process = o.ranks;
    }

    // the grid: tensor groups of tp ranks, pipelines of pp stages, ZeRO across the dp ranks of each data group
    check_no_error(tp_grid_error(r.world, o.tp));
    check_no_error(grid3_error(r.world, o.tp, o.pp));
    r.tp = o.tp;
    r.pp = o.pp;
    r.dp = r.world / (o.tp * o.pp);
    check_no_error(pipeline_plan_error(r.cfg.num_layers, r.pp, o.pp_layers));
    CHECK(o.pp_layers.empty() || r.pp > 1, "--pp_layers sets the layers of each pipeline stage: it needs --pp > 1");
    r.pipeline = make_pipeline_plan(r.cfg.num_layers, r.pp, o.pp_layers);
    CHECK(o.pp_schedule == "1f1b" || o.pp_schedule == "gpipe", "--pp_schedule must be 1f1b or gpipe (got '%s')",
          o.pp_schedule.c_str());
    r.schedule = o.pp_schedule == "gpipe" ? PipelineSchedule::GPipe : PipelineSchedule::OneFOneB;
#ifdef ZERO_CUDA
    if (r.pp > 1 && r.launch.world > 1 && r.launch.rank == 0)
        fprintf(stderr, "note: pipeline parallelism across processes (NCCL send/receive) has not yet run on GPUs\n");
#endif
    if (r.tp > 1) {
        check_no_error(tensor_parallel_error(r.cfg, r.tp));
#ifdef ZERO_CUDA
        // Emulated ranks on one GPU have matched the CPU build (H100,
        // test/run_gpu_train_tests.sh); NCCL's ncclCommSplit, which gives a
        // launched run its groups, has not run on several GPUs yet: say so.
        if (r.launch.world > 1 && r.launch.rank == 0)
            fprintf(stderr, "note: tensor parallelism across processes (NCCL, ncclCommSplit) has not yet run on GPUs\n");
#endif
    }
    CHECK(o.sp == 0 || o.sp == 1, "--sp must be 0 or 1 (got %d)", o.sp);
    r.sp = o.sp == 1;
    CHECK(!r.sp || r.tp > 1, "--sp 1 (sequence parallelism) needs --tp > 1: it cuts the tensor group's residual stream");
    CHECK(r.tp == 1 || r.sp || o.recompute != 2 || ((long)o.micro_batch * o.seq_len) % r.tp == 0,
          "-r 2 with --tp %d keeps 1/t of each saved layer input per rank (ZeRO-R Pa): B*T = %d*%d must be a "
          "multiple of %d", r.tp, o.micro_batch, o.seq_len, r.tp);
    CHECK(!r.sp || o.seq_len % r.tp == 0,
          "--sp 1 needs -t (sequence length, %d) to be a multiple of --tp %d: each rank holds 1/t of the tokens",
          o.seq_len, r.tp);

    // shapes and batch
    CHECK(o.micro_batch >= 1, "-b (micro-batch) must be at least 1 (got %d)", o.micro_batch);
    CHECK(o.seq_len >= 1 && o.seq_len <= r.cfg.max_seq_len, "-t (sequence length) must be in 1..%d for this model (got %d)",
          r.cfg.max_seq_len, o.seq_len);
    // the ranks of a tensor group share their batch: tokens per micro-step come from the dp ranks
    // (a DeepSpeed config's batch is resolved over them already: resolve_batch in flags.h)
    CHECK(o.grad_accum <= 0 && o.train_batch_seqs <= 0, "internal: DeepSpeed's batch keys not resolved");
    long per_micro = (long)o.micro_batch * o.seq_len * r.dp;
    long total = o.total_batch < 0 ? per_micro : o.total_batch;
    CHECK(total > 0 && total % per_micro == 0,
          "-d (total batch, %ld tokens) must be a positive multiple of B*T*ranks = %d*%d*%d = %ld%s", total,
          o.micro_batch, o.seq_len, r.dp, per_micro, r.tp > 1 ? " (data-parallel ranks)" : "");
    r.micro_steps = (int)(total / per_micro);

    // ZeRO
    CHECK(o.zero_stage >= 0 && o.zero_stage <= 3, "-z (ZeRO stage) must be 0, 1, 2 or 3 (got %d)", o.zero_stage);
    CHECK(o.recompute >= 0 && o.recompute <= 2, "-r (recompute) must be 0, 1 or 2 (got %d)", o.recompute);
    r.offload_optimizer = parse_offload(o.offload_optimizer, "--offload_optimizer");
    r.offload_param = parse_offload(o.offload_param, "--offload_param");
    r.offload_activations = o.offload_activations != 0;
    CHECK(!r.offload_optimizer || o.zero_stage >= 1,
          "--offload_optimizer %s needs ZeRO stage 1, 2 or 3 (stage 0 keeps every state on every rank)",
          o.offload_optimizer.c_str());
    CHECK(!r.offload_param || (o.zero_stage == 3 && r.offload_optimizer),
          "--offload_param cpu needs -z 3 and --offload_optimizer cpu or nvme (the CPU updates the slices it holds)");
    r.nvme = o.offload_optimizer == "nvme";
    CHECK(!r.nvme || !o.nvme_path.empty(), "--offload_optimizer nvme needs --nvme_path DIR: a directory on the disk");
    CHECK(o.nvme_fraction > 0 && o.nvme_fraction <= 1, "--nvme_fraction must be in (0, 1] (got %g)", o.nvme_fraction);
    CHECK(o.nvme_buffers >= 1 && o.nvme_buffers <= 64 && o.nvme_threads >= 1 && o.nvme_threads <= 64 &&
              o.nvme_queue_depth >= 1 && o.nvme_queue_depth <= 1024,
          "--nvme_buffers and --nvme_threads must be in 1..64, --nvme_queue_depth in 1..1024");
    CHECK(o.nvme_block_kib >= 4 && o.nvme_block_kib % 4 == 0 && o.nvme_block_kib <= (1 << 20),
          "--nvme_block_kib must be a multiple of 4 KiB (the disk's alignment), at most 1 GiB (got %d)",
          o.nvme_block_kib);
    CHECK(o.nvme_tile_kib >= 4 && o.nvme_tile_kib % 4 == 0 && o.nvme_tile_kib <= (1 << 22),
          "--nvme_tile_kib must be a multiple of 4 KiB, at most 4 GiB (got %d)", o.nvme_tile_kib);
    CHECK(r.nvme || o.nvme_path.empty(), "--nvme_path is where --offload_optimizer nvme keeps its states (got "
          "--offload_optimizer %s)", o.offload_optimizer.c_str());
    r.nvme_fraction = o.nvme_fraction;
    r.nvme_tile_numel = (size_t)o.nvme_tile_kib * 1024 / sizeof(float);
    r.disk = {.dir = o.nvme_path, .buffers = o.nvme_buffers, .block_bytes = (size_t)o.nvme_block_kib << 10,
              .queue_depth = o.nvme_queue_depth, .threads = o.nvme_threads};
    CHECK(o.offload_grad_accum == "host" || o.offload_grad_accum == "device",
          "--offload_grad_accum must be host or device (got '%s')", o.offload_grad_accum.c_str());
    r.offload_grad_accum_device = o.offload_grad_accum == "device";
    CHECK(!r.offload_grad_accum_device || r.offload_optimizer,
          "--offload_grad_accum device needs --offload_optimizer cpu or nvme (without offload gradients always accumulate "
          "on the device)");
    CHECK(o.offload_delay_steps >= 0, "--offload_delay_steps must be 0 or more (got %d)", o.offload_delay_steps);
    CHECK(o.offload_delay_steps == 0 || r.offload_optimizer,
          "--offload_delay_steps needs --offload_optimizer cpu or nvme (it delays the CPU AdamW's update)");
    CHECK(o.offload_delay_steps == 0 || !r.offload_param,
          "--offload_delay_steps cannot be used with --offload_param cpu (the host slices it updates are the "
          "parameters every forward gathers)");
    r.offload_delay_steps = o.offload_delay_steps;
    CHECK(o.partition_activations == 0 || o.partition_activations == 1,
          "--partition_activations must be 0 or 1 (got %d)", o.partition_activations);
    CHECK(!r.offload_activations || o.recompute == 2,
          "--offload_activations 1 needs -r 2 (only each layer's input is kept, and that is what moves)");
    CHECK(o.attention == "own" || o.attention == "cudnn", "--attention must be own or cudnn (got '%s')",
          o.attention.c_str());
    r.cudnn_attention = o.attention == "cudnn";
#ifndef ZERO_CUDNN
    CHECK(!r.cudnn_attention, "--attention cudnn: this build has no cuDNN (the Makefile looks for it with "
                              "dev/find_cudnn.sh; set CUDNN_HOME and rebuild)");
#endif
    const int head_size = r.cfg.channels / r.cfg.num_heads;
    CHECK(!r.cudnn_attention || (r.dtype != DType::F32 && head_size % 8 == 0 && head_size <= 128),
          "--attention cudnn needs -p bf16 or fp16 and a head size that is a multiple of 8, at most 128 (got %s, %d)",
          dtype_name(r.dtype), head_size);

    // optimisation
    CHECK(o.learning_rate >= 0.0f && o.warmup_steps >= 0 && o.final_lr_frac >= 0.0f && o.final_lr_frac <= 1.0f,
          "learning rate schedule: -l >= 0, -u >= 0 and 0 <= -q <= 1 please");
    const std::string schedules = " cosine WarmupLR WarmupDecayLR WarmupCosineLR ";
    CHECK(schedules.find(" " + o.lr_schedule + " ") != std::string::npos && o.warmup_min_ratio >= 0 &&
              (o.warmup_type == "log" || o.warmup_type == "linear") && o.total_num_steps >= 0,
          "--lr_schedule cosine, WarmupLR, WarmupDecayLR or WarmupCosineLR, --warmup_type log or linear, "
          "--warmup_min_ratio and --total_num_steps >= 0 please");
    CHECK(o.weight_decay >= 0.0f && o.grad_clip >= 0.0f, "weight decay and gradient clip must be >= 0");
    CHECK(o.adam_beta1 >= 0.0f && o.adam_beta1 < 1.0f && o.adam_beta2 >= 0.0f && o.adam_beta2 < 1.0f &&
              o.adam_eps > 0.0f && (o.adam_bias_correction == 0 || o.adam_bias_correction == 1),
          "AdamW: 0 <= --adam_beta1, --adam_beta2 < 1, --adam_eps > 0 and --adam_bias_correction 0 or 1 please");
    CHECK(o.max_steps >= -1, "-x (steps) must be -1 (one epoch), 0 (only write the initial model with -o) or more (got %d)",
          o.max_steps);
    CHECK(o.val_every >= 0 && o.sample_every >= 0 && o.checkpoint_every >= -1 && o.gen_tokens >= 0 &&
              o.val_max_batches >= 1,
          "-v, -s and -g must be >= 0, -n >= -1, -m >= 1");
    CHECK(o.device_memory_mib >= 0, "--device_memory must be >= 0 MiB");
    CHECK(o.host_memory_mib >= 0, "--host_memory must be >= 0 MiB");
    CHECK(o.disk_memory_mib >= 0, "--disk_memory must be >= 0 MiB");
    CHECK(o.disk_memory_mib == 0 || o.device_memory_mib > 0,
          "--disk_memory plans for another machine: give its device's memory too (--device_memory)");
    CHECK(o.host_memory_mib == 0 || o.device_memory_mib > 0,
          "--host_memory plans for another machine: give its device's memory too (--device_memory)");
    CHECK(!o.resume || !o.output_dir.empty(), "-y 1 (resume) needs -o, the directory holding the checkpoints");
    CHECK(o.checkpoint_every <= 0 || !o.output_dir.empty(), "-n (checkpoint every) needs -o");
    if (r.dtype == DType::F16)
        CHECK(o.loss_scale >= 0.0f && o.initial_scale_power >= 0 && o.initial_scale_power <= 60 &&
                  o.loss_scale_window >= 1 && o.hysteresis >= 1 && o.min_loss_scale > 0.0f,
              "fp16 loss scaling: --loss_scale >= 0, 0 <= --initial_scale_power <= 60, --loss_scale_window >= 1, "
              "--hysteresis >= 1, --min_loss_scale > 0");
    return r;
}

// What a run of its ranks needs beyond a description of it (a dry run, an estimate or a prediction runs none and
// reads no data, at any size): its emulated ranks as this process's threads, a part of every unit for each
// data-parallel rank to own and, when it trains, a vocabulary the uint16 tokens of llm.c's data files can name.
inline void check_runnable(const TrainOptions& o, const RunSetup& r, bool reads_data) {
    CHECK(r.ranks_per_process <= 4096, "--ranks must be between 1 and 4096 (got %d)", o.ranks);
    for (int st = 0; st < r.pp; st++) {  // every stage's units cut across its data-parallel ranks
        ParamLayout layout(r.cfg, r.tp, r.pp > 1 ? r.pipeline.range(st) : StageRange{});
        check_no_error(ShardPlan(layout.unit_specs(), r.dp, SHARD_ALIGN).validate());
    }
    CHECK(!reads_data || r.cfg.vocab_size <= 65536, "vocab %d does not fit the uint16 tokens of llm.c data files (a "
          "dry run, --estimate and --predict take any)", r.cfg.vocab_size);
}
