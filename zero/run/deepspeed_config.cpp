// The DeepSpeed JSON mapping (zero/run/deepspeed_config.h says what maps to what).
#include "zero/run/deepspeed_config.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "zero/base/common.h"

namespace {  // the mapping's helpers, one per section of the file

void note(bool on, const char* fmt, ...) {
    if (!on) return;
    fflush(stdout);
    va_list args;
    va_start(args, fmt);
    fprintf(stderr, "note: ");
    vfprintf(stderr, fmt, args);
    fprintf(stderr, "\n");
    va_end(args);
}

// A value for an error message: "3" (a string), 1.5, true, an object, ...
std::string describe(const JsonValue& v) {
    switch (v.type()) {
        case JsonValue::Type::Null: return "null";
        case JsonValue::Type::Bool: return v.as_bool() ? "true" : "false";
        case JsonValue::Type::Number: return v.number_text();
        case JsonValue::Type::String: {
            std::string s = v.as_string();
            if (s.size() > 40) s = s.substr(0, 37) + "...";
            for (char& c : s)
                if ((unsigned char)c < 0x20) c = ' ';  // keep the message on one line
            return "\"" + s + "\" (a string)";
        }
        default: return v.type_name();
    }
}

std::string lower(std::string s) {
    for (char& c : s) c = (char)tolower((unsigned char)c);
    return s;
}

// Every key DeepSpeed's config documents, section by section, with why it has no
// effect here (nullptr: the mapping reads it, zero/run/deepspeed_config.h). A key
// outside this table is an error that suggests the nearest known one: a typo
// ("stgae") must not silently run something else. Sections marked OPAQUE are
// whole features of DeepSpeed this trainer does not have (logging back-ends,
// profilers, pipeline parallelism, ...): one note for the section, its members
// unchecked.
struct KnownKey {
    const char* path;
    const char* why;
};
const char* const OPAQUE = "OPAQUE";
const char* const BUCKETS = "communication is one collective per unit (a layer) here, so bucket sizes have no effect";
const KnownKey KNOWN_KEYS[] = {
    {"train_batch_size", nullptr},
    {"train_micro_batch_size_per_gpu", nullptr},
    {"gradient_accumulation_steps", nullptr},
    {"gradient_clipping", nullptr},
    {"optimizer", nullptr},
    {"optimizer.type", nullptr},
    {"optimizer.params", nullptr},
    {"optimizer.params.lr", nullptr},
    {"optimizer.params.betas", nullptr},
    {"optimizer.params.eps", nullptr},
    {"optimizer.params.weight_decay", nullptr},
    {"optimizer.params.adam_w_mode", nullptr},
    {"optimizer.params.amsgrad", nullptr},
    {"optimizer.params.torch_adam", "the CPU and GPU AdamW are this trainer's own"},
    {"optimizer.params.bias_correction", "AdamW here always corrects the moments' bias"},
    {"optimizer.params.fp32_optimizer_states", "optimizer states are always fp32 here"},
    {"scheduler", nullptr},
    {"scheduler.type", nullptr},
    {"scheduler.params", nullptr},
    {"scheduler.params.warmup_num_steps", nullptr},
    {"scheduler.params.warmup_max_lr", nullptr},
    {"scheduler.params.cos_min_ratio", nullptr},
    {"scheduler.params.warmup_type", nullptr},
    {"scheduler.params.total_num_steps", "the run's length comes from -x or the data"},
    {"scheduler.params.warmup_min_lr", "warmup here starts from lr x 1/warmup steps"},
    {"scheduler.params.warmup_min_ratio", "warmup here starts from lr x 1/warmup steps"},
    {"scheduler.params.last_batch_iteration", "a resumed run takes its step from the checkpoint (-y 1)"},
    {"scheduler.params.cycle_min_lr", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_max_lr", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_first_step_size", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_second_step_size", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_first_stair_count", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_second_stair_count", "the OneCycle schedule is not implemented"},
    {"scheduler.params.decay_step_size", "the OneCycle schedule is not implemented"},
    {"scheduler.params.decay_lr_rate", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_momentum", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_min_mom", "the OneCycle schedule is not implemented"},
    {"scheduler.params.cycle_max_mom", "the OneCycle schedule is not implemented"},
    {"scheduler.params.decay_mom_rate", "the OneCycle schedule is not implemented"},
    {"scheduler.params.lr_range_test_min_lr", "the LRRangeTest schedule is not implemented"},
    {"scheduler.params.lr_range_test_step_size", "the LRRangeTest schedule is not implemented"},
    {"scheduler.params.lr_range_test_step_rate", "the LRRangeTest schedule is not implemented"},
    {"scheduler.params.lr_range_test_staircase", "the LRRangeTest schedule is not implemented"},
    {"fp16", nullptr},
    {"fp16.enabled", nullptr},
    {"fp16.loss_scale", nullptr},
    {"fp16.initial_scale_power", nullptr},
    {"fp16.loss_scale_window", nullptr},
    {"fp16.hysteresis", nullptr},
    {"fp16.min_loss_scale", nullptr},
    {"fp16.consecutive_hysteresis", nullptr},
    {"fp16.auto_cast", "the model is written in the compute dtype; there is nothing to cast"},
    {"fp16.fp16_master_weights_and_grads", "masters are always fp32 here"},
    {"bf16", nullptr},
    {"bf16.enabled", nullptr},
    {"bf16.immediate_grad_update", "gradients are reduced as backward finishes each unit, always"},
    {"bf16.check_grad_overflow", "bf16 has fp32's range: overflow is checked for fp16 only"},
    {"bfloat16", nullptr},
    {"bfloat16.enabled", nullptr},
    {"amp", nullptr},
    {"amp.enabled", nullptr},
    {"amp.opt_level", "NVIDIA Apex AMP is not used here"},
    {"zero_optimization", nullptr},
    {"zero_optimization.stage", nullptr},
    {"zero_optimization.offload_optimizer", nullptr},
    {"zero_optimization.offload_optimizer.device", nullptr},
    {"zero_optimization.offload_optimizer.pin_memory", nullptr},
    {"zero_optimization.offload_optimizer.nvme_path", "offload goes to cpu only"},
    {"zero_optimization.offload_optimizer.buffer_count", "cpu offload here double-buffers each unit's slices; buffer_count sizes nvme buffers"},
    {"zero_optimization.offload_optimizer.pipeline_read", "offload goes to cpu only (these pipeline nvme reads)"},
    {"zero_optimization.offload_optimizer.pipeline_write", "offload goes to cpu only (these pipeline nvme writes)"},
    {"zero_optimization.offload_optimizer.fast_init", "offload goes to cpu only (this speeds up nvme initialisation)"},
    {"zero_optimization.offload_optimizer.ratio", "the CPU updates every slice it holds (no partial offload)"},
    {"zero_optimization.offload_param", nullptr},
    {"zero_optimization.offload_param.device", nullptr},
    {"zero_optimization.offload_param.pin_memory", nullptr},
    {"zero_optimization.offload_param.nvme_path", "offload goes to cpu only"},
    {"zero_optimization.offload_param.buffer_count", "a unit's slice is copied up just before its all-gather; buffer_count sizes nvme buffers"},
    {"zero_optimization.offload_param.buffer_size", "offload goes to cpu only (this sizes nvme buffers)"},
    {"zero_optimization.offload_param.max_in_cpu", "offload goes to cpu only (this caps nvme's cpu cache)"},
    {"zero_optimization.cpu_offload", nullptr},
    {"zero_optimization.cpu_offload_params", "use offload_param.device = cpu"},
    {"zero_optimization.cpu_offload_use_pin_memory", "host buffers are always pinned here"},
    {"zero_optimization.allgather_partitions", "stages 1-2 always all-gather the updated slices after the step here"},
    {"zero_optimization.allgather_bucket_size", BUCKETS},
    {"zero_optimization.reduce_scatter", "stages 1-3 always reduce-scatter gradients here"},
    {"zero_optimization.reduce_bucket_size", BUCKETS},
    {"zero_optimization.overlap_comm", "collectives always run on their own stream here, overlapping compute where the order allows"},
    {"zero_optimization.contiguous_gradients", "gradients live in one flat buffer here, so they are always contiguous"},
    {"zero_optimization.sub_group_size", "the optimizer steps one unit (a layer) at a time here"},
    {"zero_optimization.stage3_prefetch_bucket_size", "stage 3 prefetches exactly the next unit (a layer) here"},
    {"zero_optimization.stage3_max_live_parameters", "stage 3 holds at most three gathered units (layers) at a time here"},
    {"zero_optimization.stage3_max_reuse_distance", "stage 3 releases every unit after use and gathers it again for backward here"},
    {"zero_optimization.stage3_param_persistence_threshold", "every unit is partitioned here, however small"},
    {"zero_optimization.stage3_model_persistence_threshold", "every unit is partitioned here, however small"},
    {"zero_optimization.stage3_gather_16bit_weights_on_model_save", "every checkpoint holds a full model.bin (rank 0 gathers each unit)"},
    {"zero_optimization.stage3_gather_fp16_weights_on_model_save", "every checkpoint holds a full model.bin (rank 0 gathers each unit)"},
    {"zero_optimization.gather_16bit_weights_on_model_save", "every checkpoint holds a full model.bin (rank 0 gathers each unit)"},
    {"zero_optimization.elastic_checkpoint", "checkpoints re-slice to any world size and stage here, always"},
    {"zero_optimization.load_from_fp32_weights", "resume always loads the fp32 masters"},
    {"zero_optimization.ignore_unused_parameters", "GPT-2 uses every parameter"},
    {"zero_optimization.round_robin_gradients", "each rank owns a fixed slice of every unit here"},
    {"zero_optimization.legacy_stage1", "there is one stage 1 here"},
    {"zero_optimization.memory_efficient_linear", "the linear layers here keep only their inputs, always"},
    {"zero_optimization.zero_hpz_partition_size", "ZeRO++'s hierarchical partitioning is not implemented"},
    {"zero_optimization.zero_quantized_weights", "ZeRO++'s quantized collectives are not implemented"},
    {"zero_optimization.zero_quantized_nontrainable_weights", "ZeRO++'s quantized collectives are not implemented"},
    {"zero_optimization.zero_quantized_gradients", "ZeRO++'s quantized collectives are not implemented"},
    {"zero_optimization.mics_shard_size", "MiCS is not implemented: shards span the whole world"},
    {"zero_optimization.mics_hierarchical_params_gather", "MiCS is not implemented"},
    {"zero_optimization.use_multi_rank_bucket_allreduce", BUCKETS},
    {"zero_optimization.pipeline_loading_checkpoint", "there is no pipeline parallelism here"},
    {"zero_optimization.override_module_apply", "the model is not a torch module"},
    {"zero_optimization.module_granularity_threshold", "the units are fixed: embeddings, each layer, the final layernorm"},
    {"zero_optimization.log_trace_cache_warnings", "stage 3's gather order is fixed, not traced"},
    {"activation_checkpointing", nullptr},
    {"activation_checkpointing.partition_activations", nullptr},
    {"activation_checkpointing.cpu_checkpointing", nullptr},
    {"activation_checkpointing.contiguous_memory_optimization", "saved layer inputs are one buffer here, always"},
    {"activation_checkpointing.number_checkpoints", "-r 2 keeps every layer's input"},
    {"activation_checkpointing.synchronize_checkpoint_boundary", "the CPU build runs in order; the GPU build's streams are ordered by events"},
    {"activation_checkpointing.profile", "each step line prints its time"},
    {"steps_per_print", "every step prints one line here"},
    {"wall_clock_breakdown", "every step line prints its time"},
    {"dump_state", "--estimate 1 prints the run's memory plan"},
    {"memory_breakdown", "use --mem_report 1 for per-rank memory"},
    {"prescale_gradients", "gradients are summed across ranks, then scaled once by 1 / tokens per step"},
    {"gradient_predivide_factor", "gradients are summed across ranks, then scaled once by 1 / tokens per step"},
    {"communication_data_type", "collectives move the compute dtype here"},
    {"seq_parallel_communication_data_type", "there is no sequence parallelism here"},
    {"zero_allow_untested_optimizer", "the optimizer is AdamW, always"},
    {"zero_force_ds_cpu_optimizer", "optimizer offload always uses this trainer's CPU AdamW"},
    {"sparse_gradients", "GPT-2's gradients are dense here"},
    {"disable_allgather", "the stages decide the collectives here"},
    {"dataloader_drop_last", "the data loader drops a shard's tail that does not fill a batch, always"},
    {"fp32_allreduce", "collectives move the compute dtype here"},
    {"load_universal_checkpoint", "checkpoints re-slice to any world size and stage here, always"},
    {"flops_profiler", OPAQUE},
    {"tensorboard", OPAQUE},
    {"wandb", OPAQUE},
    {"csv_monitor", OPAQUE},
    {"comet", OPAQUE},
    {"comms_logger", OPAQUE},
    {"monitor_config", OPAQUE},
    {"autotuning", OPAQUE},
    {"elasticity", OPAQUE},
    {"compression_training", OPAQUE},
    {"data_efficiency", OPAQUE},
    {"curriculum_learning", OPAQUE},
    {"data_types", OPAQUE},
    {"pipeline", OPAQUE},
    {"sparse_attention", OPAQUE},
    {"aio", OPAQUE},
    {"nebula", OPAQUE},
    {"checkpoint", OPAQUE},
    {"progressive_layer_drop", OPAQUE},
    {"eigenvalue", OPAQUE},
    {"quantize_training", OPAQUE},
    {"weight_quantization", OPAQUE},
    {"hybrid_engine", OPAQUE},
    {"torch_autocast", OPAQUE},
    {"tensor_parallel", OPAQUE},
    {"compile", OPAQUE},
    {"timers", OPAQUE},
};

const KnownKey* known_key(const std::string& path) {
    for (const KnownKey& k : KNOWN_KEYS)
        if (path == k.path) return &k;
    return nullptr;
}

size_t edit_distance(const std::string& a, const std::string& b) {
    std::vector<size_t> row(b.size() + 1);
    for (size_t j = 0; j <= b.size(); j++) row[j] = j;
    for (size_t i = 1; i <= a.size(); i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= b.size(); j++) {
            size_t up = row[j];
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
            diag = up;
        }
    }
    return row[b.size()];
}

// The known key of section `prefix` ("" or "zero_optimization.") nearest to `key`.
std::string nearest_known_key(const std::string& prefix, const std::string& key) {
    std::string best;
    size_t best_d = SIZE_MAX;
    for (const KnownKey& k : KNOWN_KEYS) {
        std::string p = k.path;
        if (p.compare(0, prefix.size(), prefix) != 0 || p.find('.', prefix.size()) != std::string::npos) continue;
        size_t d = edit_distance(lower(key), p.substr(prefix.size()));
        if (d < best_d) best_d = d, best = p.substr(prefix.size());
    }
    return best;
}

// One JSON object of the config, with the dotted path that names it. Reading a
// key marks it used; finish() notes every member nobody read.
class Section {
  public:
    Section() = default;
    Section(const JsonValue* v, std::string path, bool notes) : obj(v), path_(std::move(path)), notes_(notes) {
        used.assign(v->members().size(), false);
    }
    bool present() const { return obj != nullptr; }
    bool notes() const { return notes_; }

    std::string name(const char* key) const { return path_.empty() ? std::string(key) : path_ + "." + key; }

    // whether the key is there at all (not marking it used)
    bool has(const char* key) const { return obj && obj->find(key) != nullptr; }

    // the member's value (marking it used), or nullptr
    const JsonValue* get(const char* key) {
        if (!obj) return nullptr;
        const std::vector<JsonMember>& m = obj->members();
        for (size_t i = 0; i < m.size(); i++)
            if (m[i].key == key) {
                used[i] = true;
                return &m[i].value;
            }
        return nullptr;
    }

    [[noreturn]] void bad(const JsonValue& v, const char* key, const char* expected) const {
        fail("%s: DeepSpeed key %s must be %s (got %s)", v.where().c_str(), name(key).c_str(), expected,
             describe(v).c_str());
    }
    [[noreturn]] void unsupported(const JsonValue& v, const char* key, const char* why) const {
        fail("%s: DeepSpeed key %s = %s is not supported: %s", v.where().c_str(), name(key).c_str(),
             describe(v).c_str(), why);
    }

    // The typed getters return true and set `out` when the key is present with a
    // usable value; false when it is absent or "auto". Wrong types and values out
    // of range are errors that say what was expected.
    bool get_bool(const char* key, bool& out) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key)) return false;
        if (!v->is_bool()) bad(*v, key, "true or false");
        out = v->as_bool();
        return true;
    }
    bool get_int(const char* key, long long lo, long long hi, long long& out, const char* expected) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key)) return false;
        if (!v->is_integer_in(lo, hi)) bad(*v, key, expected);
        out = v->as_integer();
        return true;
    }
    bool get_int(const char* key, long long lo, long long hi, int& out, const char* expected) {
        long long x;
        if (!get_int(key, lo, hi, x, expected)) return false;
        out = (int)x;  // lo..hi are within int's range where this overload is used
        return true;
    }
    // a finite number with lo <= x <= hi (lo < x when lo_open)
    bool get_number(const char* key, double lo, double hi, bool lo_open, double& out, const char* expected) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key)) return false;
        if (!v->is_number()) bad(*v, key, expected);
        double x = v->as_number();
        if (!(x <= hi) || (lo_open ? !(x > lo) : !(x >= lo))) bad(*v, key, expected);
        out = x;
        return true;
    }
    bool get_float(const char* key, double lo, double hi, bool lo_open, float& out, const char* expected) {
        double x;
        if (!get_number(key, lo, hi, lo_open, x, expected)) return false;
        out = (float)x;
        return true;
    }
    bool get_string(const char* key, std::string& out) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key)) return false;
        if (!v->is_string()) bad(*v, key, "a string");
        out = v->as_string();
        return true;
    }
    // A nested object; absent: a Section that is not present().
    Section section(const char* key) {
        const JsonValue* v = get(key);
        if (!v) return Section();
        if (!v->is_object()) bad(*v, key, "an object");
        return Section(v, name(key), notes_);
    }

    // Every member nobody read: a known DeepSpeed key with no effect here gets a
    // note saying why; an unknown key is an error naming the nearest known one.
    void finish() const {
        if (!obj) return;
        const std::vector<JsonMember>& m = obj->members();
        for (size_t i = 0; i < m.size(); i++) {
            if (used[i]) continue;
            std::string path = name(m[i].key.c_str());
            const KnownKey* k = known_key(path);
            if (!k) {
                std::string prefix = path_.empty() ? "" : path_ + ".";
                fail("%s: unknown DeepSpeed key %s (did you mean %s%s?)", m[i].value.where().c_str(), path.c_str(),
                     prefix.c_str(), nearest_known_key(prefix, m[i].key).c_str());
            }
            if (k->why == OPAQUE) note(notes_, "ignoring DeepSpeed section %s: not a feature of this trainer", path.c_str());
            else note(notes_, "ignoring DeepSpeed key %s: %s", path.c_str(), k->why ? k->why : "it has no effect with the rest of this config");
        }
    }

    // "auto" (Hugging Face's placeholder): noted, and the caller keeps its value
    bool is_auto(const JsonValue& v, const char* key) const {
        if (!v.is_string() || v.as_string() != "auto") return false;
        note(notes_, "DeepSpeed key %s is \"auto\": keeping this trainer's value", name(key).c_str());
        return true;
    }

  private:
    const JsonValue* obj = nullptr;
    std::string path_;
    bool notes_ = true;
    std::vector<bool> used;
};

// DeepSpeed's batch: train_batch_size = micro-batch x gradient_accumulation_steps
// x world size, any two determining the third (resolve_deepspeed_batch, once
// the world size is known). A train_batch_size without a micro-batch means
// DeepSpeed's micro-batch, train_batch_size / (accumulation x world), whatever
// -b said before the file; a -b after the file is the micro-batch given.
void apply_batch(Section& top, TrainOptions& o) {
    bool has_micro = top.get_int("train_micro_batch_size_per_gpu", 1, INT_MAX, o.micro_batch, "an integer >= 1");
    int accum = 0;
    long long tb = 0;
    bool has_accum = top.get_int("gradient_accumulation_steps", 1, INT_MAX, accum, "an integer >= 1");
    bool has_tb = top.get_int("train_batch_size", 1, LONG_MAX, tb, "an integer >= 1");
    if (has_accum || has_tb) {  // the file's batch replaces an earlier -d (and a later -d replaces it)
        o.total_batch = -1;
        o.grad_accum = has_accum ? accum : 0;
        o.train_batch_seqs = has_tb ? (long)tb : 0;
        o.derive_micro_batch = has_tb && !has_micro ? 1 : 0;
    } else if (has_micro) {
        o.derive_micro_batch = 0;
    }
    // DeepSpeed clips only when gradient_clipping is given (its default is 0)
    if (!top.has("gradient_clipping")) o.grad_clip = 0.0f;
    top.get_float("gradient_clipping", 0.0, INFINITY, false, o.grad_clip, "a number >= 0 (0: no clipping)");
}

// bf16 / bfloat16, fp16, amp
void apply_precision(Section& top, TrainOptions& o) {
    bool decided_bf16 = false, decided_fp16 = false, bf16_on = false, fp16_on = false;
    const JsonValue* fp16_enabled_value = nullptr;

    Section bf16 = top.section("bf16");
    Section bfloat16 = top.section("bfloat16");  // DeepSpeed's older name
    if (bf16.present() && bfloat16.present())
        fail("%s: DeepSpeed config has both bf16 and bfloat16 sections; keep one (bf16)",
             top.get("bfloat16")->where().c_str());
    Section& b = bf16.present() ? bf16 : bfloat16;
    if (b.present()) {
        const JsonValue* e = b.get("enabled");
        bool on = false;
        if (!e || b.get_bool("enabled", on)) decided_bf16 = true;  // absent: DeepSpeed's default, false
        bf16_on = on;
        b.finish();
    }

    Section fp16 = top.section("fp16");
    if (fp16.present()) {
        fp16_enabled_value = fp16.get("enabled");
        bool on = false;
        if (!fp16_enabled_value || fp16.get_bool("enabled", on)) decided_fp16 = true;
        fp16_on = on;
        fp16.get_float("loss_scale", 0.0, INFINITY, false, o.loss_scale, "a number >= 0 (0: dynamic)");
        fp16.get_int("initial_scale_power", 0, 60, o.initial_scale_power, "an integer in 0..60");
        fp16.get_int("loss_scale_window", 1, INT_MAX, o.loss_scale_window, "an integer >= 1");
        fp16.get_int("hysteresis", 1, INT_MAX, o.hysteresis, "an integer >= 1");
        fp16.get_float("min_loss_scale", 0.0, INFINITY, true, o.min_loss_scale, "a number > 0");
        bool consecutive = false;
        if (fp16.get_bool("consecutive_hysteresis", consecutive) && consecutive)
            fp16.unsupported(*fp16.get("consecutive_hysteresis"), "consecutive_hysteresis",
                             "hysteresis is restored when the scale grows, as with DeepSpeed's default false");
        fp16.finish();
    }

    Section amp = top.section("amp");
    if (amp.present()) {
        bool on = false;
        if (amp.get_bool("enabled", on) && on)
            amp.unsupported(*amp.get("enabled"), "enabled", "NVIDIA Apex AMP is not used here; enable bf16 or fp16");
        amp.finish();
    }

    if (bf16_on && fp16_on)
        fail("%s: DeepSpeed config enables both bf16 and fp16; enable at most one",
             fp16_enabled_value->where().c_str());
    const bool kept = (b.present() && !decided_bf16) || (fp16.present() && !decided_fp16);  // "auto"
    if (bf16_on) o.precision = "bf16";
    else if (fp16_on) o.precision = "fp16";
    else if (!kept) o.precision = "fp32";  // DeepSpeed trains in fp32 unless bf16 or fp16 is enabled
}

void apply_optimizer(Section& top, TrainOptions& o) {
    Section opt = top.section("optimizer");
    if (!opt.present()) return;  // DeepSpeed then uses the client's optimizer: the flags' AdamW

    std::string type;
    if (opt.get_string("type", type) && lower(type) != "adam" && lower(type) != "adamw")
        opt.unsupported(*opt.get("type"), "type",
                        "this trainer's optimizer is AdamW with decoupled weight decay: use Adam or AdamW");
    Section p = opt.section("params");
    // the defaults of DeepSpeed's Adam/AdamW for what params leaves out
    if (!p.has("lr")) o.learning_rate = 1e-3f;
    if (!p.has("betas")) o.adam_beta1 = 0.9f, o.adam_beta2 = 0.999f;
    if (!p.has("eps")) o.adam_eps = 1e-8f;
    if (!p.has("weight_decay")) o.weight_decay = 0.0f;
    if (p.present()) {
        p.get_float("lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
        p.get_float("weight_decay", 0.0, INFINITY, false, o.weight_decay, "a number >= 0");
        const JsonValue* betas = p.get("betas");
        if (betas && !p.is_auto(*betas, "betas")) {
            bool ok = betas->is_array() && betas->size() == 2;
            for (size_t i = 0; ok && i < 2; i++)
                ok = (*betas)[i].is_number() && (*betas)[i].as_number() >= 0.0 && (*betas)[i].as_number() < 1.0;
            if (!ok) p.bad(*betas, "betas", "an array of two numbers in [0, 1), like [0.9, 0.95]");
            o.adam_beta1 = (float)(*betas)[0].as_number();
            o.adam_beta2 = (float)(*betas)[1].as_number();
        }
        double eps;
        if (p.get_number("eps", 0.0, 1.0, true, eps, "a number in (0, 1]")) o.adam_eps = (float)eps;
        bool flag = false;
        if (p.get_bool("adam_w_mode", flag) && !flag)
            p.unsupported(*p.get("adam_w_mode"), "adam_w_mode",
                          "weight decay is always decoupled (AdamW), never added to the gradient");
        if (p.get_bool("amsgrad", flag) && flag)
            p.unsupported(*p.get("amsgrad"), "amsgrad", "the optimizer is plain AdamW");
        p.finish();
    }
    opt.finish();
}

void apply_scheduler(Section& top, TrainOptions& o) {
    Section sch = top.section("scheduler");
    if (!sch.present()) return;
    std::string type;
    sch.get_string("type", type);
    Section p = sch.section("params");
    p.get_int("warmup_num_steps", 0, INT_MAX, o.warmup_steps, "an integer >= 0");
    const char* shape;
    if (type == "WarmupLR") {
        p.get_float("warmup_max_lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
        o.final_lr_frac = 1.0f;
        shape = "linear warmup to warmup_max_lr, then constant";
    } else if (type == "WarmupDecayLR") {
        p.get_float("warmup_max_lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
        o.final_lr_frac = 0.0f;
        shape = "linear warmup to warmup_max_lr, then cosine (not linear) decay to 0 over the run's steps";
    } else if (type == "WarmupCosineLR") {
        p.get_float("cos_min_ratio", 0.0, 1.0, false, o.final_lr_frac, "a number in [0, 1]");
        shape = "linear warmup, then cosine decay to cos_min_ratio x the peak";
    } else {
        shape = "linear warmup over warmup_num_steps, then cosine decay to -q x the peak (this trainer's schedule)";
    }
    std::string warmup_type;
    if (p.get_string("warmup_type", warmup_type) && warmup_type != "linear")
        note(sch.notes(), "DeepSpeed key %s = \"%s\": warmup here is linear", p.name("warmup_type").c_str(),
             warmup_type.c_str());
    note(sch.notes(), "scheduler %s: %s", type.empty() ? "(no type)" : type.c_str(), shape);
    p.finish();
    sch.finish();
}

void apply_offload(Section& z, const char* key, std::string& out) {
    Section off = z.section(key);
    if (!off.present()) return;
    std::string device;
    if (off.get_string("device", device)) {
        if (device == "cpu" || device == "none") out = device;
        else if (device == "nvme")
            off.unsupported(*off.get("device"), "device", "offload goes to cpu (pinned host memory) or none");
        else off.bad(*off.get("device"), "device", "\"cpu\" or \"none\"");
    }
    bool pin = true;
    if (off.get_bool("pin_memory", pin) && !pin)
        note(off.notes(), "DeepSpeed key %s = false: host buffers are always pinned here",
             off.name("pin_memory").c_str());
    off.finish();
}

void apply_zero(Section& top, TrainOptions& o) {
    // DeepSpeed's defaults, with or without the section: stage 0, no offload
    Section z = top.section("zero_optimization");
    if (!z.has("stage")) o.zero_stage = 0;
    if (!z.has("offload_optimizer") && !z.has("cpu_offload")) o.offload_optimizer = "none";
    if (!z.has("offload_param")) o.offload_param = "none";
    if (!z.present()) return;
    z.get_int("stage", 0, 3, o.zero_stage, "an integer 0, 1, 2 or 3");
    apply_offload(z, "offload_optimizer", o.offload_optimizer);
    apply_offload(z, "offload_param", o.offload_param);
    bool cpu_offload = false;  // DeepSpeed's older spelling of offload_optimizer.device = cpu
    if (z.get_bool("cpu_offload", cpu_offload) && cpu_offload) o.offload_optimizer = "cpu";
    z.finish();
}

void apply_activation_checkpointing(Section& top, TrainOptions& o) {
    Section ac = top.section("activation_checkpointing");
    if (!ac.present()) return;
    bool flag = false;
    if (ac.get_bool("partition_activations", flag) && flag)
        note(ac.notes(), "ignoring DeepSpeed key %s = true (there is no tensor parallelism here to partition over)",
             ac.name("partition_activations").c_str());
    bool cpu = false;
    if (ac.get_bool("cpu_checkpointing", cpu)) {
        if (cpu) {
            o.recompute = 2;
            o.offload_activations = 1;
            note(ac.notes(), "%s = true: recomputing whole blocks (-r 2) from inputs kept in host memory "
                 "(--offload_activations 1)", ac.name("cpu_checkpointing").c_str());
        } else {
            o.offload_activations = 0;
        }
    }
    if (!cpu)
        note(ac.notes(), "activation_checkpointing: recomputation is chosen with -r (0 none, 1 GELU, 2 whole "
             "blocks); only cpu_checkpointing = true sets it from the config");
    ac.finish();
}

}  // namespace

void apply_deepspeed_json(const JsonValue& root, TrainOptions& o, bool notes) {
    if (!root.is_object())
        fail("%s: a DeepSpeed config is a JSON object {...}, not %s", root.where().c_str(), root.type_name());
    Section top(&root, "", notes);
    apply_batch(top, o);
    apply_precision(top, o);
    apply_optimizer(top, o);
    apply_scheduler(top, o);
    apply_zero(top, o);
    apply_activation_checkpointing(top, o);
    top.finish();
}

void apply_deepspeed_config(const std::string& path, TrainOptions& o, bool notes) {
    CHECK(file_exists(path), "DeepSpeed config %s does not exist", path.c_str());
    apply_deepspeed_json(parse_json_file(path), o, notes);
}

long deepspeed_total_batch(int accum, long train_batch, int micro_batch, int seq_len, int world) {
    if (accum <= 0 && train_batch <= 0) return -1;
    CHECK(micro_batch >= 1 && seq_len >= 1 && world >= 1, "deepspeed_total_batch: B, T and world must be >= 1");
    // sequences per micro-step over all ranks
    double per_micro = (double)micro_batch * world;
    long seqs;
    if (train_batch > 0) {
        if (accum > 0 && (double)train_batch != per_micro * accum)
            fail("DeepSpeed train_batch_size (%ld) must equal micro-batch x gradient_accumulation_steps x world size "
                 "= %d x %d x %d = %.0f (micro-batch: train_micro_batch_size_per_gpu or -b)",
                 train_batch, micro_batch, accum, world, per_micro * accum);
        if (std::fmod((double)train_batch, per_micro) != 0.0)
            fail("DeepSpeed train_batch_size (%ld) must be a multiple of micro-batch x world size = %d x %d "
                 "(micro-batch: train_micro_batch_size_per_gpu or -b)",
                 train_batch, micro_batch, world);
        seqs = train_batch;
    } else {
        CHECK(per_micro * accum < 9.0e18, "DeepSpeed gradient_accumulation_steps (%d) is too large", accum);
        seqs = (long)per_micro * accum;
    }
    CHECK((double)seqs * seq_len < 9.0e18, "DeepSpeed batch of %ld sequences of %d tokens is too large", seqs, seq_len);
    return seqs * seq_len;
}

void resolve_deepspeed_batch(TrainOptions& o, int world) {
    if ((o.grad_accum <= 0 && o.train_batch_seqs <= 0) || world < 1) return;
    if (o.derive_micro_batch && o.train_batch_seqs > 0) {  // DeepSpeed's micro-batch from the other two
        long per_micro = (long)(o.grad_accum > 0 ? o.grad_accum : 1) * world;
        if (o.train_batch_seqs % per_micro != 0 || o.train_batch_seqs / per_micro > INT_MAX)
            fail("DeepSpeed train_batch_size (%ld) must be divisible by gradient_accumulation_steps x world size = "
                 "%d x %d: without train_micro_batch_size_per_gpu the micro-batch is their quotient",
                 o.train_batch_seqs, o.grad_accum > 0 ? o.grad_accum : 1, world);
        o.micro_batch = (int)(o.train_batch_seqs / per_micro);
    }
    o.total_batch = deepspeed_total_batch(o.grad_accum, o.train_batch_seqs, o.micro_batch, o.seq_len, world);
    o.grad_accum = 0;
    o.train_batch_seqs = 0;
    o.derive_micro_batch = 0;
}
