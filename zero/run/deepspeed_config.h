// DeepSpeed-style JSON configuration: `--deepspeed_config ds.json` sets the
// options a DeepSpeed user would put in their config file.
//
// The rule: a key in the file sets the matching option, as if its flag were given
// where --deepspeed_config is on the command line (flags after it override it);
// a key absent from the file leaves the option as it was. The mapping:
//
//   train_micro_batch_size_per_gpu            -b
//   gradient_accumulation_steps, train_batch_size
//                                             TrainOptions::grad_accum and
//                                             train_batch_seqs (replacing an
//                                             earlier -d), made into -b and -d by
//                                             DeepSpeed's rules once the world size
//                                             is known (resolve_deepspeed_batch)
//   gradient_clipping                         --grad_clip
//   bf16.enabled / bfloat16.enabled, fp16.enabled
//                                             -p: bf16, fp16, or fp32 when a bf16
//                                             or fp16 section is present and
//                                             neither is enabled (as in DeepSpeed)
//   fp16.loss_scale, initial_scale_power, loss_scale_window, hysteresis,
//   min_loss_scale                            the flags of the same names
//   optimizer.type                            Adam or AdamW (any case): both are
//                                             AdamW with decoupled weight decay
//   optimizer.params.lr, weight_decay         -l, -c
//   optimizer.params.betas, eps               --adam_beta1/2, --adam_eps
//   scheduler.params.warmup_num_steps         -u; and by scheduler type:
//     WarmupLR        warmup_max_lr -> -l, constant after warmup (-q 1)
//     WarmupDecayLR   warmup_max_lr -> -l, decay to 0 (-q 0; cosine here, linear there)
//     WarmupCosineLR  cos_min_ratio -> -q
//   zero_optimization.stage                   -z
//   zero_optimization.offload_optimizer.device
//                                             --offload_optimizer (none, cpu or nvme)
//   zero_optimization.offload_param.device    --offload_param (none or cpu; nvme is
//                                             an error: stage 3's slices are read
//                                             by every pass, so they stay in host
//                                             memory beside states on disk)
//   and with offload_optimizer.device nvme:
//   offload_optimizer.nvme_path               --nvme_path (required)
//   offload_optimizer.buffer_count            --nvme_buffers
//   aio.block_size (bytes)                    --nvme_block_kib (block_size / 1024;
//                                             a multiple of 4096)
//   aio.queue_depth                           --nvme_queue_depth
//   aio.intra_op_parallelism (or its older name thread_count)
//                                             --nvme_threads
//   activation_checkpointing.cpu_checkpointing true
//                                             -r 2 --offload_activations 1
//
// A config means what it means in DeepSpeed: where it leaves a value out,
// DeepSpeed's default holds, not the flag's (stage 0 and no offload without
// zero_optimization.stage; fp32 unless bf16 or fp16 is enabled; no clipping
// without gradient_clipping; an Adam/AdamW section without lr, betas, eps or
// weight_decay: 1e-3, (0.9, 0.999), 1e-8, 0; nvme offload without buffer_count
// or aio keys: 4 buffers, 1 MiB blocks, queue depth 8, one thread). Without an
// optimizer section the flags' AdamW settings stay (DeepSpeed then uses the
// client's optimizer). --nvme_fraction has no DeepSpeed key (offload_optimizer.
// ratio splits states between device and host, not host and disk): only the
// flag sets it. Without nvme offload the aio section changes nothing (a note
// per key).
//
// Every key DeepSpeed documents is known (deepspeed_keys.cpp's KNOWN_KEYS):
// one this trainer has no use for (steps_per_print, zero_optimization.overlap_comm,
// the bucket sizes, ...) gets a "note:" line on stderr saying why it has no
// effect; a key DeepSpeed does not know ("stgae") is a one-line error naming the
// nearest known key. A known key with a value this trainer cannot honour (nvme
// parameter offload, aio.use_gds true, the Lamb optimizer, amsgrad, fp16 and bf16
// both enabled), or a value of the wrong JSON type ("stage": "3"), is a one-line
// error naming the key.
// The string "auto" (Hugging Face's placeholder) in place of a value means
// "keep this trainer's value", with a note.
//
// The file must be strict JSON (zero/base/json.h): DeepSpeed itself reads configs
// with hjson, which also allows comments; here comments are a parse error.
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

// The mapping is implemented in zero/run/deepspeed_config.cpp, with the table of
// known keys in zero/run/deepspeed_keys.cpp and the batch rules in
// zero/run/deepspeed_batch.cpp (compiled once).
