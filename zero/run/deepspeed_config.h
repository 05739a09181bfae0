// DeepSpeed-style JSON configuration: `--deepspeed_config ds.json` sets the
// options a DeepSpeed user would put in their config file, as DeepSpeed reads it.
//
// Where the file stands on the command line it sets every option it governs,
// by its key or DeepSpeed's default; flags after it override it (README.md,
// "DeepSpeed configs", has the rule and where this reader differs). Each section
// maps to the flags of the same meaning, by an apply_* of its own in
// deepspeed_config.cpp, with DeepSpeed's defaults for what it leaves out: the
// batch keys to -b and -d (resolve_deepspeed_batch), gradient_clipping to
// --grad_clip, bf16/fp16 to -p and fp16's loss-scale keys to the flags of their
// names, optimizer to -l, -c and --adam_*, scheduler to --lr_schedule and its
// flags, zero_optimization to -z and --offload_* (with nvme, its and aio's keys
// to --nvme_*), activation_checkpointing to -r 2 --offload_activations 1 and
// --partition_activations.
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
