// Command-line flags, in llm.c's spirit (single letters for the common ones),
// with long names for the rest. One table drives parsing and --help.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "zero/base/common.h"
#include "zero/comm/launcher.h"
#include "zero/run/deepspeed_config.h"
#include "zero/run/options.h"


// One flag: its names, help, and the TrainOptions member it sets (exactly one
// of the member pointers is non-null).
struct FlagSpec {
    const char* short_name;  // e.g. "-b", or nullptr
    const char* long_name;   // e.g. "--micro_batch"
    const char* help;
    int TrainOptions::*i = nullptr;
    long TrainOptions::*l = nullptr;
    unsigned long long TrainOptions::*u = nullptr;
    float TrainOptions::*f = nullptr;
    double TrainOptions::*d = nullptr;
    std::string TrainOptions::*s = nullptr;
};
template <typename V>  // m set as the one member pointer of its type
FlagSpec flag(const char* s, const char* l, V TrainOptions::*m, const char* h) {
    FlagSpec f{.short_name = s, .long_name = l, .help = h};
    std::get<V TrainOptions::*&>(std::tie(f.i, f.l, f.u, f.f, f.d, f.s)) = m;
    return f;
}

inline const std::vector<FlagSpec>& flag_specs() {
    using O = TrainOptions;
    static const std::vector<FlagSpec> specs = {
        flag("-i", "--train", &O::train_pattern, "training data: glob of llm.c token shards"),
        flag("-j", "--val", &O::val_pattern, "validation data: glob of llm.c token shards"),
        flag("-e", "--model", &O::model,
             "model: d12|d24|d36|d48, a shape L=2,H=4,C=64,V=512,T=64, or an llm.c model file to start from"),
        flag("-o", "--output", &O::output_dir, "output directory for main.log, reports and checkpoints"),
        flag("-b", "--micro_batch", &O::micro_batch, "micro-batch size: sequences per rank per micro-step"),
        flag("-t", "--seq_len", &O::seq_len, "sequence length"),
        flag("-d", "--total_batch", &O::total_batch,
             "tokens per optimizer step; a multiple of B*T*ranks, the ratio being gradient accumulation (-1: B*T*ranks)"),
        flag("-l", "--lr", &O::learning_rate, "peak learning rate"),
        flag("-u", "--warmup", &O::warmup_steps, "warmup steps"),
        flag("-q", "--final_lr_frac", &O::final_lr_frac, "cosine decay ends at this fraction of the peak"),
        flag(nullptr, "--lr_schedule", &O::lr_schedule,
             "cosine: -u linear warmup steps, then cosine decay to -q x -l at the run's end; or DeepSpeed's WarmupLR, "
             "WarmupDecayLR, WarmupCosineLR as its lr_schedules compute them, with -u, -q and the three flags below"),
        flag(nullptr, "--warmup_type", &O::warmup_type, "DeepSpeed's schedules: log or linear warmup"),
        flag(nullptr, "--warmup_min_ratio", &O::warmup_min_ratio, "DeepSpeed's schedules: warmup starts at this x -l"),
        flag(nullptr, "--total_num_steps", &O::total_num_steps,
             "DeepSpeed's WarmupDecayLR and WarmupCosineLR: the step their decay ends at (0: the run's last)"),
        flag("-c", "--weight_decay", &O::weight_decay, "AdamW decoupled weight decay (matrices, embeddings)"),
        flag(nullptr, "--grad_clip", &O::grad_clip, "clip the global gradient norm to this (0: off)"),
        flag(nullptr, "--adam_beta1", &O::adam_beta1, "AdamW: decay of the first moment"),
        flag(nullptr, "--adam_beta2", &O::adam_beta2, "AdamW: decay of the second moment"),
        flag(nullptr, "--adam_eps", &O::adam_eps, "AdamW: added to the second moment's root"),
        flag(nullptr, "--adam_bias_correction", &O::adam_bias_correction, "AdamW: 1 divides the moments by 1 - beta^t"),
        flag("-x", "--steps", &O::max_steps, "optimizer steps (-1: one epoch of the training data; 0 with -o: write the initial model and exit)"),
        flag("-f", "--shuffle", &O::shuffle, "1: shuffle shards and batches every epoch"),
        flag(nullptr, "--seed", &O::seed, "seed of initialisation, shuffling, rounding and sampling"),
        flag("-v", "--val_every", &O::val_every, "validation loss every this many steps (0: never)"),
        flag("-m", "--val_batches", &O::val_max_batches, "validation batches per evaluation"),
        flag("-s", "--sample_every", &O::sample_every, "print a generated sample every this many steps (0: never)"),
        flag("-g", "--gen_tokens", &O::gen_tokens, "tokens per sample"),
        flag("-n", "--checkpoint_every", &O::checkpoint_every,
             "checkpoint every this many steps (0: at the end only, -1: never); needs -o"),
        flag("-y", "--resume", &O::resume, "1: resume from the latest complete checkpoint in -o"),
        flag("-z", "--zero_stage", &O::zero_stage, "ZeRO stage 0 (DDP), 1, 2 or 3"),
        flag(nullptr, "--ranks", &O::ranks, "emulate this many ranks in this process (threads)"),
        flag(nullptr, "--tp", &O::tp,
             "tensor-parallel degree t: the world is t x d ranks, each group of t adjacent ranks splits every layer "
             "Megatron-style, ZeRO shards across the d data-parallel ranks"),
        flag(nullptr, "--sp", &O::sp,
             "1: sequence parallelism (needs --tp > 1): layernorms and the residual stream hold B*T/t rows per "
             "rank; all-gathers and reduce-scatters instead of all-reduces"),
        flag(nullptr, "--pp", &O::pp,
             "pipeline stages P: consecutive layers on each stage, the step's micro-batches (-d's accumulation) "
             "flowing through them; the world is dp x tp x pp ranks, rank = (stage*dp + dp_rank)*tp + tp_rank, and "
             "ZeRO shards across each stage's dp ranks"),
        flag(nullptr, "--pp_layers", &O::pp_layers,
             "layers per pipeline stage, e.g. 3,3,2 (default: as even as possible, the first stages one more)"),
        flag(nullptr, "--pp_schedule", &O::pp_schedule,
             "1f1b | gpipe: 1F1B (warm-up forwards, then one forward one backward; stage s holds at most P-s "
             "micro-batches) or GPipe (all forwards, then all backwards; every stage holds all of them)"),
        flag(nullptr, "--pp_schedule_print", &O::pp_schedule_print,
             "1: print this run's pipeline schedule (each stage's forwards and backwards, and the timeline) and exit"),
        flag("-p", "--precision", &O::precision,
             "fp32 | bf16 | fp16 compute, masters always fp32 (default: bf16 on the GPU, fp32 on the CPU build)"),
        flag(nullptr, "--attention", &O::attention,
             "own: our fused attention kernels; cudnn: cuDNN's fused flash attention (bf16/fp16; builds that found "
             "cuDNN)"),
        flag("-r", "--recompute", &O::recompute,
             "activation recomputation: 0 none, 1 GELU, 2 whole block from its input"),
        flag(nullptr, "--offload_optimizer", &O::offload_optimizer,
             "none | cpu | nvme: fp32 master, Adam moments and gradient slices in host memory, CPU AdamW "
             "(stages 1-3); nvme: the master and moments in files under --nvme_path, read ahead of the CPU AdamW "
             "and written behind it"),
        flag(nullptr, "--nvme_path", &O::nvme_path,
             "with --offload_optimizer nvme: the directory (on the disk) the optimizer states live in while training"),
        flag(nullptr, "--nvme_fraction", &O::nvme_fraction,
             "with --offload_optimizer nvme: the share of the optimizer states on disk, in whole units (the last "
             "ones); the rest stay in host memory, so host and disk add up"),
        flag(nullptr, "--nvme_buffers", &O::nvme_buffers,
             "with --offload_optimizer nvme: tiles of states in flight between the disk and the CPU AdamW (pinned "
             "host buffers of 3 x --nvme_tile_kib each; DeepSpeed's buffer_count)"),
        flag(nullptr, "--nvme_tile_kib", &O::nvme_tile_kib,
             "with --offload_optimizer nvme: KiB of each state (master, m, v) the CPU AdamW takes from the disk at a time"),
        flag(nullptr, "--nvme_threads", &O::nvme_threads, "with --offload_optimizer nvme: I/O threads (aio's intra_op_parallelism)"),
        flag(nullptr, "--nvme_block_kib", &O::nvme_block_kib, "with --offload_optimizer nvme: KiB per read or write request (aio's block_size)"),
        flag(nullptr, "--nvme_queue_depth", &O::nvme_queue_depth,
             "with --offload_optimizer nvme: requests in flight per I/O thread (aio's queue_depth)"),
        flag(nullptr, "--offload_param", &O::offload_param,
             "none | cpu: stage 3's parameter slices in host memory (needs --offload_optimizer cpu or nvme)"),
        flag(nullptr, "--offload_grad_accum", &O::offload_grad_accum,
             "host | device: with --offload_optimizer cpu at stages 2-3, where the gradient slices add up until "
             "the step: in host memory, each micro-step's going down as it is reduced; or in a device shard "
             "(s*Psi/N bytes moved from the host to the device), going down during the step ahead of the CPU AdamW"),
        flag(nullptr, "--offload_delay_steps", &O::offload_delay_steps,
             "W: with --offload_optimizer cpu, after W ordinary steps each step's CPU AdamW runs during the next "
             "step, which computes on the parameters from before that update (ZeRO-Offload's delayed parameter "
             "update; s*Psi/N more host memory); 0: off"),
        flag(nullptr, "--offload_activations", &O::offload_activations,
             "1: with -r 2, keep each layer's saved input in host memory"),
        flag(nullptr, "--partition_activations", &O::partition_activations,
             "1: with --tp t and -r 2 (no --sp), each rank keeps 1/t of each saved layer input (ZeRO-R's Pa); 0: "
             "whole"),
        flag(nullptr, "--device_memory", &O::device_memory_mib,
             "MiB of device memory to plan for (0: what the GPU has free; the CPU build: its RAM)"),
        flag(nullptr, "--host_memory", &O::host_memory_mib,
             "with --device_memory: MiB of host memory a rank may use on the planned machine, as given (0: this "
             "machine's available RAM less 4 GiB + 10%)"),
        flag(nullptr, "--disk_memory", &O::disk_memory_mib,
             "with --device_memory and --offload_optimizer nvme: MiB free on the planned machine's disk for a "
             "rank's states (0: what --nvme_path's disk has free)"),
        flag(nullptr, "--mem_report", &O::mem_report,
             "1: per-rank memory after forward/backward/step and bytes communicated, each step (CSVs in -o too)"),
        flag(nullptr, "--estimate", &O::estimate, "1: print the predicted per-rank memory, check it fits this machine, and exit (status 1 if not)"),
        flag(nullptr, "--params", &O::params,
             "with --estimate 1: model states only (parameters, gradients, Adam) of a model of this many parameters "
             "(e.g. 7.5e9) at every stage over --ranks ranks, in the paper's mixed precision unless -p fp32"),
        flag(nullptr, "--calibrate", &O::calibrate,
             "time every operation of this run's step, where the trainer runs it, on this machine into a measured "
             "profile (JSON; created or extended), then exit"),
        flag(nullptr, "--predict", &O::predict,
             "predict this run's step time, tokens/s and TFLOP/s on a profile (zero/perf/profiles/*.json, or one "
             "--calibrate wrote) from its dry run, then exit"),
        flag(nullptr, "--nodes", &O::nodes, "with --predict on a cluster profile: nodes (world = nodes x devices per node)"),
        flag(nullptr, "--dry_run", &O::dry_run,
             "1: run one rank per pipeline stage without computing anything: each one's memory after forward, "
             "backward and the step, and at its peak, at any scale, then exit (with --predict: and the step's time)"),
        flag(nullptr, "--trace", &O::trace,
             "write one step's timeline to this JSON file (Trace Event format: ui.perfetto.dev or Chromium's DevTools "
             "open it), a track per rank and lane: with --predict the predicted step of the dry run; in a run, its "
             "first steady step as it ran"),
        flag(nullptr, "--consolidate", &O::consolidate,
             "write one fp32 model file from the sharded checkpoint in this directory, then exit"),
        flag(nullptr, "--from_hf", &O::from_hf,
             "start from a Hugging Face GPT-2 folder (config.json + model.safetensors; fp32/fp16/bf16)"),
        flag(nullptr, "--export_hf", &O::export_hf,
             "write the model of -e FILE, --from_hf or --consolidate as a Hugging Face GPT-2 folder here, then exit"),
        flag(nullptr, "--sample", &O::sample,
             "print text from this model (a model file, checkpoint folder or Hugging Face folder) instead of training"),
        flag(nullptr, "--prompt", &O::prompt, "--sample: the text to continue (default: standard input if not a terminal)"),
        flag(nullptr, "--temperature", &O::temperature, "--sample: softmax temperature (0: the most likely token)"),
        flag(nullptr, "--top_k", &O::top_k, "--sample: draw from the k most likely tokens (0: all)"),
        flag(nullptr, "--tokenizer", &O::tokenizer_path, "llm.c gpt2_tokenizer.bin, to print samples as text"),
        flag(nullptr, "--deepspeed_config", &O::deepspeed_config,
             "a DeepSpeed JSON config (zero_optimization, offload, fp16/bf16, optimizer, batch keys) applied "
             "here; flags after it override it"),
        flag(nullptr, "--loss_scale", &O::loss_scale, "fp16: static loss scale (0: dynamic)"),
        flag(nullptr, "--initial_scale_power", &O::initial_scale_power, "fp16: dynamic scale starts at 2^this"),
        flag(nullptr, "--loss_scale_window", &O::loss_scale_window, "fp16: clean steps before doubling"),
        flag(nullptr, "--hysteresis", &O::hysteresis, "fp16: overflows tolerated before halving"),
        flag(nullptr, "--min_loss_scale", &O::min_loss_scale, "fp16: floor of the dynamic scale"),
        flag(nullptr, "--timeout", &O::timeout_s,
             "seconds a rank waits for the others (rendezvous, any collective) before the job ends naming whom it "
             "waited for (0: 300 s at the rendezvous or ZERO_BOOTSTRAP_TIMEOUT, 900 s in a collective)"),
        flag(nullptr, "--overwrite", &O::overwrite,
             "1: delete the checkpoints an earlier run left in -o and start afresh (without it such a run is refused)"),
    };
    return specs;
}

// One option's value as --help prints it.
inline std::string flag_value_text(const FlagSpec& f, const TrainOptions& o) {
    if (f.i) return strf("%d", o.*f.i);
    if (f.l) return strf("%ld", o.*f.l);
    if (f.u) return strf("%llu", o.*f.u);
    if (f.f) return strf("%g", o.*f.f);
    if (f.d) return strf("%g", o.*f.d);
    return o.*f.s;
}

inline void print_usage(const char* prog) {
    TrainOptions defaults;
    printf("usage: %s [flags]\n\n", prog);
    for (const FlagSpec& f : flag_specs()) {
        const std::string names = strf("%s%s%s", f.short_name ? f.short_name : "", f.short_name ? ", " : "    ",
                                       f.long_name);
        const std::string def = flag_value_text(f, defaults);
        printf("  %-26s %s%s%s%s\n", names.c_str(), f.help, def.empty() ? "" : " [", def.c_str(),
               def.empty() ? "" : "]");
    }
    printf("\n  -h, --help                 this list\n");
}

// Records which flags' values the DeepSpeed config decided: those it changed (its
// batch keys count as -b and -d, which resolve_deepspeed_batch sets from them), and
// always the stage, the clip, the learning rate and its schedule.
inline void note_config_settings(const TrainOptions& before, TrainOptions& after) {
    const std::string& s = after.lr_schedule;  // and the schedule's own flags
    const std::string shown = std::string(" --zero_stage --grad_clip --lr --lr_schedule --warmup ") +
                              (s != "cosine" ? "--warmup_type --warmup_min_ratio " : "") +
                              (s == "WarmupDecayLR" || s == "WarmupCosineLR" ? "--total_num_steps " : "") +
                              (s == "cosine" || s == "WarmupCosineLR" ? "--final_lr_frac " : "");
    for (const FlagSpec& f : flag_specs()) {
        bool batch = (f.i == &TrainOptions::micro_batch || f.l == &TrainOptions::total_batch) &&
                     (after.grad_accum != before.grad_accum || after.train_batch_seqs != before.train_batch_seqs);
        if (f.s == &TrainOptions::deepspeed_config) continue;
        if (batch || shown.find(std::string(" ") + f.long_name + " ") != std::string::npos ||
            flag_value_text(f, before) != flag_value_text(f, after))
            after.set_by_config.push_back(f.long_name);
    }
}

// Parses argv into opts. Unknown flags and malformed values are one-line errors.
inline bool parse_flags(int argc, char** argv, TrainOptions& opts) {
    bool model_given = false;  // -e, which --from_hf would otherwise silently override
    for (int i = 1; i < argc; i++) {
        std::string arg = argv[i];
        if (arg == "-h" || arg == "--help") return false;
        CHECK(arg.size() >= 2 && arg[0] == '-', "unexpected argument '%s': every setting is a flag with a value, "
              "like -x 10 (see --help)", arg.c_str());
        std::string value;
        size_t eq = arg.find('=');
        if (arg.rfind("--", 0) == 0 && eq != std::string::npos) {  // --flag=value
            value = arg.substr(eq + 1);
            arg = arg.substr(0, eq);
        } else {
            CHECK(i + 1 < argc, "flag %s needs a value (see --help)", arg.c_str());
            value = argv[++i];
        }
        const FlagSpec* spec = nullptr;
        for (const FlagSpec& f : flag_specs())
            if ((f.short_name && arg == f.short_name) || arg == f.long_name) spec = &f;
        CHECK(spec, "unknown flag %s (see --help)", arg.c_str());
        char* end = nullptr;
        errno = 0;
        if (spec->i || spec->l) {
            long v = strtol(value.c_str(), &end, 10);
            CHECK(*end == '\0' && !value.empty() && errno == 0 && (spec->l || (v >= -2147483647L && v <= 2147483647L)),
                  "flag %s wants an integer, got '%s'", arg.c_str(), value.c_str());
            if (spec->i) opts.*spec->i = (int)v;
            else opts.*spec->l = v;
            if (spec->l == &TrainOptions::total_batch) opts.grad_accum = 0, opts.train_batch_seqs = 0;  // -d wins
            if (spec->i == &TrainOptions::micro_batch) opts.derive_micro_batch = 0;  // the micro-batch, given
        } else if (spec->u) {
            unsigned long long v = strtoull(value.c_str(), &end, 10);
            CHECK(*end == '\0' && !value.empty() && errno == 0 && value[0] != '-',
                  "flag %s wants a non-negative integer, got '%s'", arg.c_str(), value.c_str());
            opts.*spec->u = v;
        } else if (spec->f || spec->d) {
            double v = strtod(value.c_str(), &end);
            CHECK(*end == '\0' && !value.empty() && errno == 0, "flag %s wants a number, got '%s'", arg.c_str(),
                  value.c_str());
            CHECK(std::isfinite(v) && (!spec->f || std::isfinite((float)v)), "flag %s wants a finite number, got '%s'",
                  arg.c_str(), value.c_str());
            if (spec->f) opts.*spec->f = (float)v;
            else opts.*spec->d = v;
        } else {
            opts.*spec->s = value;
            if (spec->s == &TrainOptions::model) model_given = true;
            // the file's settings, as if given as flags here (its notes from rank 0 only)
            if (spec->s == &TrainOptions::deepspeed_config) {
                TrainOptions before = opts;
                apply_deepspeed_config(value, opts, detect_launch_env().rank == 0);
                note_config_settings(before, opts);
                continue;
            }
        }
        const std::string name = spec->long_name;
        if (std::find(opts.set_by_config.begin(), opts.set_by_config.end(), name) != opts.set_by_config.end())
            opts.overridden_after_config.push_back(name);
    }
    CHECK(!model_given || opts.from_hf.empty(), "-e %s and --from_hf %s both name the model to start from: give one",
          opts.model.c_str(), opts.from_hf.c_str());
    return true;
}

// DeepSpeed's batch keys (train_batch_size = micro-batch x accumulation x
// world), solved once the world is known: after the flags and, for --predict
// on a cluster profile, after its --nodes set the world. With tensor or
// pipeline parallelism DeepSpeed's world here is the data-parallel degree,
// world / (tp x pp): the ranks of a tensor group or a pipeline share their
// batch. (A world the grid does not divide is left for make_run_setup to refuse.)
inline void resolve_batch(TrainOptions& opts) {
    LaunchEnv launch = detect_launch_env();
    const int world = launch.world > 1 ? launch.world : opts.ranks, model_parallel = opts.tp * opts.pp;
    if (model_parallel < 1 || world % model_parallel != 0) return;
    resolve_deepspeed_batch(opts, world / model_parallel);
}

// A command line given as one string ("-e d12 -b 4 -z 2") parsed into opts, as
// the trainer would take it.
inline void parse_flag_string(const std::string& flags, TrainOptions& opts) {
    std::vector<std::string> words = {"train_gpt2_zero"};
    std::istringstream in(flags);
    for (std::string w; in >> w;) words.push_back(w);
    std::vector<char*> argv;
    for (std::string& w : words) argv.push_back(&w[0]);
    parse_flags((int)argv.size(), argv.data(), opts);
}

// The options of such a command line: a run the reproduction or a profile describes.
inline TrainOptions options_from_flags(const std::string& flags) {
    TrainOptions o;
    parse_flag_string(flags, o);
    resolve_batch(o);
    return o;
}

// The run's header line about the DeepSpeed config: every setting it decided,
// with its value, and the ones flags after it decided instead.
inline void print_option_sources(const TrainOptions& o, FILE* out) {
    if (o.deepspeed_config.empty()) return;
    std::string from_config, from_flags;
    for (const FlagSpec& f : flag_specs()) {
        const std::string name = f.long_name;
        bool set = std::count(o.set_by_config.begin(), o.set_by_config.end(), name) > 0;
        bool overridden = std::count(o.overridden_after_config.begin(), o.overridden_after_config.end(), name) > 0;
        std::string item = " " + name + " " + flag_value_text(f, o);
        if (set && !overridden) from_config += item;
        if (overridden) from_flags += item;
    }
    fprintf(out, "from %s (DeepSpeed's meaning and defaults):%s\n", o.deepspeed_config.c_str(),
            from_config.empty() ? " nothing" : from_config.c_str());
    if (!from_flags.empty()) fprintf(out, "from flags after it:%s\n", from_flags.c_str());
}
