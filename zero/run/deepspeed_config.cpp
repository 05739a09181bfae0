// The DeepSpeed JSON mapping (zero/run/deepspeed_config.h says what maps to what):
// the reader of one section of the file (Section: typed getters, "auto", notes,
// and the check of what nobody read against zero/run/deepspeed_keys.h's table),
// and one apply_* per section. DeepSpeed's batch rules, applied once the world
// size is known, are in zero/run/deepspeed_batch.cpp.
#include "zero/run/deepspeed_config.h"

#include <climits>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/run/deepspeed_keys.h"

namespace {  // the mapping's helpers, one per section of the file

using deepspeed_detail::KnownKey;
using deepspeed_detail::OPAQUE;
using deepspeed_detail::known_key;
using deepspeed_detail::lower;
using deepspeed_detail::nearest_known_key;

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
    // (Int: lo..hi are within its range where it is used)
    template <typename Int>
    bool get_int(const char* key, long long lo, long long hi, Int& out, const char* expected) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key)) return false;
        if (!v->is_integer_in(lo, hi)) bad(*v, key, expected);
        out = (Int)v->as_integer();
        return true;
    }
    // a finite number with lo <= x <= hi (lo < x when lo_open), as a float or a double
    template <typename Real>
    bool get_number(const char* key, double lo, double hi, bool lo_open, Real& out, const char* expected) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key)) return false;
        if (!v->is_number()) bad(*v, key, expected);
        double x = v->as_number();
        if (!(x <= hi) || (lo_open ? !(x > lo) : !(x >= lo))) bad(*v, key, expected);
        out = (Real)x;
        return true;
    }
    // "enabled" (absent: DeepSpeed's default, false); false where it is "auto", deciding nothing
    bool get_enabled(bool& on) { return !has("enabled") || get_bool("enabled", on); }
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
    top.get_number("gradient_clipping", 0.0, INFINITY, false, o.grad_clip, "a number >= 0 (0: no clipping)");
}

// bf16 / bfloat16, fp16, amp
void apply_precision(Section& top, TrainOptions& o) {
    bool bf16_on = false, fp16_on = false;
    // (a Section that is not present reads as empty: every key absent)
    Section bf16 = top.section("bf16");
    Section bfloat16 = top.section("bfloat16");  // DeepSpeed's older name
    if (bf16.present() && bfloat16.present())
        fail("%s: DeepSpeed config has both bf16 and bfloat16 sections; keep one (bf16)",
             top.get("bfloat16")->where().c_str());
    Section& b = bf16.present() ? bf16 : bfloat16;
    const bool decided_bf16 = b.get_enabled(bf16_on);
    b.finish();

    Section fp16 = top.section("fp16");
    const bool decided_fp16 = fp16.get_enabled(fp16_on);
    fp16.get_number("loss_scale", 0.0, INFINITY, false, o.loss_scale, "a number >= 0 (0: dynamic)");
    fp16.get_int("initial_scale_power", 0, 60, o.initial_scale_power, "an integer in 0..60");
    fp16.get_int("loss_scale_window", 1, INT_MAX, o.loss_scale_window, "an integer >= 1");
    fp16.get_int("hysteresis", 1, INT_MAX, o.hysteresis, "an integer >= 1");
    fp16.get_number("min_loss_scale", 0.0, INFINITY, true, o.min_loss_scale, "a number > 0");
    bool consecutive = false;
    if (fp16.get_bool("consecutive_hysteresis", consecutive) && consecutive)
        fp16.unsupported(*fp16.get("consecutive_hysteresis"), "consecutive_hysteresis",
                         "hysteresis is restored when the scale grows, as with DeepSpeed's default false");
    fp16.finish();

    Section amp = top.section("amp");
    bool amp_on = false;
    if (amp.get_bool("enabled", amp_on) && amp_on)
        amp.unsupported(*amp.get("enabled"), "enabled", "NVIDIA Apex AMP is not used here; enable bf16 or fp16");
    amp.finish();

    if (bf16_on && fp16_on)
        fail("%s: DeepSpeed config enables both bf16 and fp16; enable at most one",
             fp16.get("enabled")->where().c_str());
    const bool kept = !decided_bf16 || !decided_fp16;  // "auto"
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
    p.get_number("lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
    p.get_number("weight_decay", 0.0, INFINITY, false, o.weight_decay, "a number >= 0");
    const JsonValue* betas = p.get("betas");
    if (betas && !p.is_auto(*betas, "betas")) {
        bool ok = betas->is_array() && betas->size() == 2;
        for (size_t i = 0; ok && i < 2; i++)
            ok = (*betas)[i].is_number() && (*betas)[i].as_number() >= 0.0 && (*betas)[i].as_number() < 1.0;
        if (!ok) p.bad(*betas, "betas", "an array of two numbers in [0, 1), like [0.9, 0.95]");
        o.adam_beta1 = (float)(*betas)[0].as_number();
        o.adam_beta2 = (float)(*betas)[1].as_number();
    }
    p.get_number("eps", 0.0, 1.0, true, o.adam_eps, "a number in (0, 1]");
    bool flag = false;
    if (p.get_bool("adam_w_mode", flag) && !flag)
        p.unsupported(*p.get("adam_w_mode"), "adam_w_mode",
                      "weight decay is always decoupled (AdamW), never added to the gradient");
    if (p.get_bool("amsgrad", flag) && flag)
        p.unsupported(*p.get("amsgrad"), "amsgrad", "the optimizer is plain AdamW");
    p.finish();
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
        p.get_number("warmup_max_lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
        o.final_lr_frac = 1.0f;
        shape = "linear warmup to warmup_max_lr, then constant";
    } else if (type == "WarmupDecayLR") {
        p.get_number("warmup_max_lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
        o.final_lr_frac = 0.0f;
        shape = "linear warmup to warmup_max_lr, then cosine (not linear) decay to 0 over the run's steps";
    } else if (type == "WarmupCosineLR") {
        p.get_number("cos_min_ratio", 0.0, 1.0, false, o.final_lr_frac, "a number in [0, 1]");
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

void read_pin_memory(Section& off) {
    bool pin = true;
    if (off.get_bool("pin_memory", pin) && !pin)
        note(off.notes(), "DeepSpeed key %s = false: host buffers are always pinned here",
             off.name("pin_memory").c_str());
}

// offload_optimizer: none, cpu, or nvme with the states' directory and ring of
// buffers (the aio section, apply_aio, tunes the disk's requests)
void apply_offload_optimizer(Section& z, TrainOptions& o) {
    Section off = z.section("offload_optimizer");
    if (!off.present()) return;
    std::string device;
    if (off.get_string("device", device)) {
        if (device != "cpu" && device != "none" && device != "nvme")
            off.bad(*off.get("device"), "device", "\"cpu\", \"nvme\" or \"none\"");
        o.offload_optimizer = device;
    }
    read_pin_memory(off);
    if (o.offload_optimizer == "nvme") {  // from this device, or from a flag before a device "auto"
        if (device == "nvme" && !off.has("nvme_path"))
            fail("%s: DeepSpeed key %s is missing: device \"nvme\" needs the directory the optimizer states live in",
                 off.get("device")->where().c_str(), off.name("nvme_path").c_str());
        if (off.get_string("nvme_path", o.nvme_path) && o.nvme_path.empty())
            off.bad(*off.get("nvme_path"), "nvme_path", "a directory on the disk");
        if (!off.has("buffer_count")) o.nvme_buffers = 4;  // DeepSpeed's default
        off.get_int("buffer_count", 1, 64, o.nvme_buffers, "an integer in 1..64");
    }
    off.finish();
}

// offload_param: none or cpu. Stage 3's parameter slices are read by every
// forward and backward pass, so here they never go further than host memory.
void apply_offload_param(Section& z, TrainOptions& o) {
    Section off = z.section("offload_param");
    if (!off.present()) return;
    std::string device;
    if (off.get_string("device", device)) {
        if (device == "nvme")
            off.unsupported(*off.get("device"), "device",
                            "stage 3's parameter slices are read by every forward and backward pass, so they stay in "
                            "host memory here: use offload_param.device \"cpu\" with offload_optimizer.device \"nvme\"");
        if (device != "cpu" && device != "none") off.bad(*off.get("device"), "device", "\"cpu\" or \"none\"");
        o.offload_param = device;
    }
    read_pin_memory(off);
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
    apply_offload_optimizer(z, o);
    apply_offload_param(z, o);
    bool cpu_offload = false;  // DeepSpeed's older spelling of offload_optimizer.device = cpu
    if (z.get_bool("cpu_offload", cpu_offload) && cpu_offload) o.offload_optimizer = "cpu";
    z.finish();
}

// aio: how the optimizer states on disk are read and written. It means
// something only with offload_optimizer.device nvme; otherwise each key is a
// note. With nvme, what the section leaves out is DeepSpeed's default.
void apply_aio(Section& top, TrainOptions& o) {
    Section aio = top.section("aio");
    if (o.offload_optimizer != "nvme") {
        aio.finish();
        return;
    }
    // bytes per request, in whole 4 KiB pages (the disk's alignment), as --nvme_block_kib takes it
    const char* block_expected = "a positive multiple of 4096 (bytes), at most 1073741824";
    long long block = 0;
    if (!aio.has("block_size")) o.nvme_block_kib = 1024;
    if (aio.get_int("block_size", 1, 1LL << 30, block, block_expected)) {
        if (block % 4096 != 0) aio.bad(*aio.get("block_size"), "block_size", block_expected);
        o.nvme_block_kib = (int)(block / 1024);
    }
    if (!aio.has("queue_depth")) o.nvme_queue_depth = 8;
    aio.get_int("queue_depth", 1, 1024, o.nvme_queue_depth, "an integer in 1..1024");
    // intra_op_parallelism is thread_count's newer name: either, or both agreeing
    int threads = 0, older = 0;
    const bool has_threads = aio.get_int("intra_op_parallelism", 1, 64, threads, "an integer in 1..64");
    const bool has_older = aio.get_int("thread_count", 1, 64, older, "an integer in 1..64");
    if (has_threads && has_older && threads != older)
        fail("%s: DeepSpeed keys aio.intra_op_parallelism (%d) and aio.thread_count (%d) are one setting "
             "(thread_count is its older name); keep one", aio.get("thread_count")->where().c_str(), threads, older);
    if (has_threads || has_older) o.nvme_threads = has_threads ? threads : older;
    else if (!aio.has("intra_op_parallelism") && !aio.has("thread_count")) o.nvme_threads = 1;
    bool gds = false;
    if (aio.get_bool("use_gds", gds) && gds)
        aio.unsupported(*aio.get("use_gds"), "use_gds",
                        "GPUDirect Storage needs cuFile, which this trainer does not use: the states go from disk to "
                        "pinned host memory and the CPU AdamW");
    aio.finish();
}

void apply_activation_checkpointing(Section& top, TrainOptions& o) {
    Section ac = top.section("activation_checkpointing");
    if (!ac.present()) return;
    bool flag = false;
    if (ac.get_bool("partition_activations", flag)) o.partition_activations = flag ? 1 : 0;  // (with --tp and -r 2)
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
    apply_aio(top, o);  // after apply_zero: it reads only with nvme offload
    apply_activation_checkpointing(top, o);
    top.finish();
}

void apply_deepspeed_config(const std::string& path, TrainOptions& o, bool notes) {
    CHECK(file_exists(path), "DeepSpeed config %s does not exist", path.c_str());
    apply_deepspeed_json(parse_json_file(path), o, notes);
}
