// DeepSpeed-style JSON configuration: `--deepspeed_config ds.json` sets the
// options a DeepSpeed user would put in their config file, as DeepSpeed reads it.
//
// Where the file stands on the command line it sets every option it governs,
// by its key or DeepSpeed's default; flags after it override it (README.md,
// "DeepSpeed configs", has the rule and where this reader differs). The mapping:
//
//   train_micro_batch_size_per_gpu            -b
//   gradient_accumulation_steps, train_batch_size
//                                             made into -b and -d by DeepSpeed's
//                                             rules once the world size is known
//                                             (resolve_deepspeed_batch)
//   gradient_clipping                         --grad_clip
//   bf16.enabled / bfloat16.enabled, fp16.enabled
//                                             -p bf16, fp16, else fp32
//   fp16.loss_scale, initial_scale_power, loss_scale_window, hysteresis,
//   min_loss_scale                            the flags of the same names
//   optimizer.type                            Adam or AdamW (any case): AdamW
//   optimizer.params.lr, weight_decay, betas, eps, bias_correction (absent:
//   1e-3, 0, (0.9, 0.999), 1e-8, true)        -l, -c, --adam_beta1/2, --adam_eps,
//                                             --adam_bias_correction
//   scheduler.type, params                    --lr_schedule WarmupLR, WarmupDecayLR
//                                             or WarmupCosineLR (others refused),
//                                             run as DeepSpeed's lr_schedules run
//                                             them (learning_rate_at), with -u,
//                                             --warmup_type, --total_num_steps,
//                                             --warmup_min_ratio (warmup_min_lr /
//                                             warmup_max_lr, which is -l) and -q
//                                             (cos_min_ratio); DeepSpeed's defaults
//   zero_optimization.stage                   -z
//   zero_optimization.offload_optimizer.device (or cpu_offload true)
//                                             --offload_optimizer none, cpu, nvme
//   zero_optimization.offload_param.device (or cpu_offload_param true)
//                                             --offload_param none or cpu (nvme is
//                                             refused: stage 3's slices are read by
//                                             every pass, so they stay in host memory)
//   with offload_optimizer.device nvme (absent: DeepSpeed's 4 buffers, 1 MiB
//   blocks, depth 8, one thread): offload_optimizer.nvme_path, buffer_count,
//   aio.block_size (bytes), queue_depth, intra_op_parallelism (or thread_count)
//                                             --nvme_path, --nvme_buffers,
//                                             --nvme_block_kib, --nvme_queue_depth,
//                                             --nvme_threads
//   activation_checkpointing.cpu_checkpointing true
//                                             -r 2 --offload_activations 1
//   activation_checkpointing.partition_activations
//                                             --partition_activations
//
// Unknown keys: refused where DeepSpeed refuses them, else a note (Section::finish
// in deepspeed_config.cpp); a value this trainer cannot honour, or of the wrong
// JSON type, is a one-line error naming the key.
#pragma once

#include <string>

#include "zero/base/json.h"
#include "zero/run/options.h"

// Reads the file and applies it to `o`, every key to the option it names.
// Errors end the program with one line (fail()). notes=false silences the
// "note:" lines (e.g. on ranks other than 0).
void apply_deepspeed_config(const std::string& path, TrainOptions& o, bool notes = true);
// The same for a parsed document (the tests use this one).
void apply_deepspeed_json(const JsonValue& root, TrainOptions& o, bool notes = true);

// Tokens per optimizer step (the -d value) that DeepSpeed's
//   train_batch_size = micro-batch x gradient_accumulation_steps x world size
// describes, with whichever of the two the file gave, or -1 when it gave
// neither. A train_batch_size that does not fit is a one-line error.
long deepspeed_total_batch(int gradient_accumulation_steps, long train_batch_size, int micro_batch, int seq_len,
                           int world);

// Applies DeepSpeed's batch rules once the world size is known (after every flag):
// of train_batch_size, micro-batch and gradient_accumulation_steps any two
// determine the third, and all three must agree:
//   train_batch_size = micro-batch x gradient_accumulation_steps x world size
// train_batch_size alone means accumulation 1 and micro-batch = train_batch_size
// / world. The result is set as -b and -d (tokens per step); anything that does
// not divide is a one-line error quoting the rule.
void resolve_deepspeed_batch(TrainOptions& o, int world);
