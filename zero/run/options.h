// Everything a run can be told: one member per flag (zero/run/flags.h), which
// --deepspeed_config may also set (zero/run/deepspeed_config.h). The defaults
// here are the flags' defaults, and --help prints them from this struct.
#pragma once

#include <string>
#include <vector>

struct TrainOptions {
    // data and model
    std::string train_pattern = "data/mobydick/mobydick_train*.bin";
    std::string val_pattern = "data/mobydick/mobydick_val*.bin";
    std::string tokenizer_path = "data/gpt2_tokenizer.bin";
    std::string model = "d12";  // descriptor, shape, or llm.c model file
    std::string output_dir;     // logs and checkpoints; empty = none
    // batch
    int micro_batch = 4;      // -b: sequences per rank per micro-step
    int seq_len = 1024;       // -t
    long total_batch = -1;    // -d: tokens per optimizer step (-1: one micro-step on every rank)
    // optimisation
    float learning_rate = 3e-4f;
    int warmup_steps = 0;
    float final_lr_frac = 1.0f;
    // the schedule (learning_rate_at, zero/run/run_setup.h): cosine, or DeepSpeed's WarmupLR, WarmupDecayLR,
    // WarmupCosineLR with their warmup curve, start (x lr) and last step (0: the run's last)
    std::string lr_schedule = "cosine", warmup_type = "log";
    float warmup_min_ratio = 0.0f;
    int total_num_steps = 0;
    float weight_decay = 0.0f;
    float grad_clip = 1.0f;
    int max_steps = -1;  // -1: one epoch
    int shuffle = 0;
    unsigned long long seed = 1337;
    // evaluation, sampling, checkpoints
    int val_every = 20;
    int val_max_batches = 20;
    int sample_every = 20;
    int gen_tokens = 64;
    int checkpoint_every = 0;  // 0: only at the end (when -o is given); -1: never (reports and logs only)
    int resume = 0;
    // ZeRO and memory
    int zero_stage = 1;
    int ranks = 1;  // emulated ranks in this process
    int tp = 1;     // tensor-parallel degree: ranks per tensor group (world = tp x data-parallel ranks)
    int sp = 0;     // 1: sequence parallelism in the tensor group (needs tp > 1)
    int pp = 1;     // pipeline stages (world = dp x tp x pp)
    std::string pp_layers;             // layers per stage, "a,b,..."; empty: as even as possible
    std::string pp_schedule = "1f1b";  // 1f1b | gpipe
    int pp_schedule_print = 0;         // 1: print the schedule and exit
    std::string precision;  // fp32 | bf16 | fp16; default: bf16 on the GPU, fp32 on the CPU build
    int recompute = 0;
    std::string attention = "own";  // own | cudnn: our fused kernels, or cuDNN's (kernels/attention_cudnn.cuh)
    std::string offload_optimizer = "none";  // none | cpu | nvme
    // --offload_optimizer nvme: the states' directory, their share on disk (whole units, the rest in host
    // memory), and the disk pipeline's ring, I/O threads, request size and depth (DeepSpeed's buffer_count
    // and aio section)
    std::string nvme_path;
    double nvme_fraction = 1.0;
    int nvme_buffers = 4, nvme_threads = 1, nvme_block_kib = 1024, nvme_queue_depth = 8, nvme_tile_kib = 16384;
    std::string offload_param = "none";      // none | cpu
    std::string offload_grad_accum = "host";  // host | device: where offloaded stages 2-3 add up micro-steps
    int offload_delay_steps = 0;  // W > 0: after W steps the CPU AdamW of each step overlaps the next (DPU)
    int offload_activations = 0;
    int partition_activations = 1;  // ZeRO-R's Pa with --tp and -r 2: a rank keeps 1/t of each saved layer input
    double device_memory_mib = 0;  // 0: the real device (GPU), or on the CPU build the machine's RAM
    double disk_memory_mib = 0;    // with device_memory_mib and --offload_optimizer nvme: the planned disk's free space
    double host_memory_mib = 0;    // with device_memory_mib: the planned machine's host memory (0: this machine's)
    int mem_report = 0;
    int estimate = 0;
    double params = 0;  // --estimate for a raw parameter count: model states only, any model
    // the step-time model (zero/perf/): time this run's operations into a profile; predict a step on one
    std::string calibrate;  // a measured profile to time this run's operations into, then exit
    std::string predict;    // a profile (zero/perf/profiles/) to predict this run's step on, then exit
    int dry_run = 0;        // 1: run the step without computing (zero/run/dry_run.h): memory by phase, then exit
    std::string trace;      // one step's timeline, Trace Event JSON (zero/perf/trace.h): predicted, or measured
    int nodes = 1;          // --predict on a cluster profile: nodes (the world is nodes x devices per node)
    std::string consolidate;  // checkpoint to turn into one model file, then exit
    std::string from_hf;      // a Hugging Face GPT-2 folder to start from (config.json + model.safetensors)
    std::string export_hf;    // write the model (-e file, --from_hf or --consolidate) as a Hugging Face folder, then exit
    // sampling instead of training (zero/run/sample.h); -g, --seed and --tokenizer apply
    std::string sample;        // the model: a model file, a checkpoint folder or a Hugging Face folder
    std::string prompt;        // empty: standard input if it is not a terminal
    float temperature = 1.0f;  // 0: always the most likely token
    int top_k = 0;             // 0: all tokens
    // fp16 dynamic loss scaling (DeepSpeed's names and semantics)
    float loss_scale = 0.0f;  // > 0: static scale
    int initial_scale_power = 16;
    int loss_scale_window = 1000;
    int hysteresis = 2;
    float min_loss_scale = 1.0f;
    // AdamW's moments
    float adam_beta1 = 0.9f, adam_beta2 = 0.95f, adam_eps = 1e-8f;
    int adam_bias_correction = 1;
    // a DeepSpeed-style JSON config (zero/run/deepspeed_config.h), applied where the
    // flag stands on the command line: later flags override it
    std::string deepspeed_config;
    int grad_accum = 0;         // its gradient_accumulation_steps; 0: -d decides (a later -d resets it)
    long train_batch_seqs = 0;  // its train_batch_size, sequences per step over all ranks; 0: -d decides
    // checkpoints
    int overwrite = 0;  // 1: a fresh run may delete the checkpoints already in -o
    // hangs: seconds a rank waits for the others (rendezvous, collectives) before the
    // job ends naming whom it waited for; 0: the rendezvous' ZERO_BOOTSTRAP_TIMEOUT or
    // 300 s, and COLLECTIVE_TIMEOUT_S (zero/comm/comm.h) in collectives
    double timeout_s = 0;
    // DeepSpeed's batch rule when its config gave train_batch_size but no micro-batch
    // (and no -b followed): micro-batch = train_batch_size / (accumulation x world)
    int derive_micro_batch = 0;
    // where the settings came from, for the run's header: the flags (long names) the
    // DeepSpeed config set, and those of them a later flag set again
    std::vector<std::string> set_by_config, overridden_after_config;
};
