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

// What reading the file has to say. A note that changes the run, or what it means,
// is a line of its own as it comes; the keys with no effect here, the sections of
// features this trainer lacks and the "auto" keys with the values they keep are
// folded into a line each at the end.
struct Notes {
    bool on = true;
    std::string no_effect, absent, kept;
    void add(std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; }
    void print() const {
        if (!absent.empty()) note(on, "ignoring DeepSpeed sections of features this trainer lacks: %s", absent.c_str());
        if (!kept.empty()) note(on, "\"auto\" keeps this trainer's values: %s", kept.c_str());
        if (!no_effect.empty())
            note(on, "no effect here (each tunes what this trainer does one fixed way; zero/run/deepspeed_keys.cpp "
                 "says how): %s", no_effect.c_str());
    }
};

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
    Section(const JsonValue* v, std::string path, Notes* notes) : obj(v), path_(std::move(path)), notes_(notes) {
        used.assign(v->members().size(), false);
    }
    bool present() const { return obj != nullptr; }
    bool notes() const { return notes_ && notes_->on; }

    std::string name(const char* key) const { return path_.empty() ? std::string(key) : path_ + "." + key; }

    // Whether the key is there at all (not marking it used). Every key the mapping
    // reads it asks for, present or not, so finish() knows them.
    bool has(const char* key) const {
        asked.push_back(key);
        return obj && obj->find(key) != nullptr;
    }

    // the member's value (marking it used), or nullptr
    const JsonValue* get(const char* key) {
        asked.push_back(key);
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
    // usable value; false when it is absent or "auto" (which keeps `out`, or what
    // `kept` says). Wrong types and values out of range are errors that say what
    // was expected.
    bool get_bool(const char* key, bool& out, const char* kept = nullptr) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key, kept ? kept : out ? "true" : "false")) return false;
        if (!v->is_bool()) bad(*v, key, "true or false");
        out = v->as_bool();
        return true;
    }
    // (Int: lo..hi are within its range where it is used)
    template <typename Int>
    bool get_int(const char* key, long long lo, long long hi, Int& out, const char* expected,
                 const char* kept = nullptr) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key, kept ? kept : std::to_string(out))) return false;
        if (!v->is_integer_in(lo, hi)) bad(*v, key, expected);
        out = (Int)v->as_integer();
        return true;
    }
    // a finite number with lo <= x <= hi (lo < x when lo_open), as a float or a double
    template <typename Real>
    bool get_number(const char* key, double lo, double hi, bool lo_open, Real& out, const char* expected) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key, strf("%g", (double)out))) return false;
        if (!v->is_number()) bad(*v, key, expected);
        double x = v->as_number();
        if (!(x <= hi) || (lo_open ? !(x > lo) : !(x >= lo))) bad(*v, key, expected);
        out = (Real)x;
        return true;
    }
    // "enabled" (absent: DeepSpeed's default, false); false where it is "auto", deciding nothing
    bool get_enabled(bool& on, const char* kept) { return !has("enabled") || get_bool("enabled", on, kept); }
    bool get_string(const char* key, std::string& out) {
        const JsonValue* v = get(key);
        if (!v || is_auto(*v, key, out)) return false;
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

    // Every member nobody read, as DeepSpeed treats it. Its pydantic-checked sections
    // (zero_optimization and its offload sections) and the optimizer's and scheduler's
    // params (keyword arguments: a scheduler's own) refuse a key they do not take, and
    // negative sizes; elsewhere it ignores unknown keys, and so does this reader, with
    // a note. A known key with no effect here joins the folded note.
    void finish() const {
        if (!obj) return;
        const bool strict =
            path_.rfind("zero_optimization", 0) == 0 || path_ == "optimizer.params" || path_ == "scheduler.params";
        const std::string prefix = path_.empty() ? "" : path_ + ".";
        const std::vector<JsonMember>& m = obj->members();
        for (size_t i = 0; i < m.size(); i++) {
            if (used[i]) continue;  // (a key the mapping asked for and found)
            const std::string path = prefix + m[i].key, near = nearest_known_key(prefix, m[i].key, asked);
            const std::string hint = near.empty() ? "" : " (did you mean " + prefix + near + "?)";
            const KnownKey* k = known_key(path);
            const JsonValue& v = m[i].value;
            if (!k && strict)
                fail("%s: %s%s: a key this trainer does not read, in a section where DeepSpeed refuses keys it does "
                     "not know", v.where().c_str(), path.c_str(), hint.c_str());
            if (!k)
                note(notes(), "ignoring unknown DeepSpeed key %s%s, as DeepSpeed does%s", path.c_str(), hint.c_str(),
                     path_ == "bf16" || path_ == "fp16" ? " up to 0.17.0 (later versions refuse it)" : "");
            else if (strict && v.is_number() && v.as_number() < 0 && m[i].key != "mics_shard_size" &&
                     m[i].key.find("module_granularity_threshold") == std::string::npos)  // (its signed two)
                bad(v, m[i].key.c_str(), "a number >= 0, as DeepSpeed checks");
            else if (v.is_bool() && v.as_bool() &&  // (masters or states in 16 bits)
                     (m[i].key.find("16_master_weights") != std::string::npos || m[i].key == "bf16_optimizer_states"))
                note(notes(), "%s: true keeps them in 16 bits in DeepSpeed; %s", path.c_str(), k->why);
            else if (notes_)
                notes_->add(k->why == OPAQUE ? notes_->absent : notes_->no_effect, path);
        }
    }

    // "auto" (Hugging Face's placeholder): the caller keeps its value, `kept`, and the note says which
    bool is_auto(const JsonValue& v, const char* key, const std::string& kept) const {
        if (!v.is_string() || v.as_string() != "auto") return false;
        if (notes_) notes_->add(notes_->kept, name(key) + " " + kept);
        return true;
    }

  private:
    const JsonValue* obj = nullptr;
    std::string path_;
    Notes* notes_ = nullptr;
    std::vector<bool> used;
    mutable std::vector<std::string> asked;
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
    bool has_accum = top.get_int("gradient_accumulation_steps", 1, INT_MAX, accum, "an integer >= 1", "(-d's)");
    bool has_tb = top.get_int("train_batch_size", 1, LONG_MAX, tb, "an integer >= 1", "(-b and -d's)");
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
    const char* kept = o.precision.empty() ? "(the build's default precision)" : o.precision.c_str();
    // (a Section that is not present reads as empty: every key absent)
    Section bf16 = top.section("bf16");
    Section bfloat16 = top.section("bfloat16");  // DeepSpeed's older name
    if (bf16.present() && bfloat16.present())
        fail("%s: DeepSpeed config has both bf16 and bfloat16 sections; keep one (bf16)",
             top.get("bfloat16")->where().c_str());
    Section& b = bf16.present() ? bf16 : bfloat16;
    const bool decided_bf16 = b.get_enabled(bf16_on, kept);
    b.finish();

    Section fp16 = top.section("fp16");
    const bool decided_fp16 = fp16.get_enabled(fp16_on, kept);
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
    const bool kept_precision = !decided_bf16 || !decided_fp16;  // "auto"
    if (bf16_on) o.precision = "bf16";
    else if (fp16_on) o.precision = "fp16";
    else if (!kept_precision) o.precision = "fp32";  // DeepSpeed trains in fp32 unless bf16 or fp16 is enabled
}

void apply_optimizer(Section& top, TrainOptions& o) {
    Section opt = top.section("optimizer");
    if (!opt.present()) return;  // DeepSpeed then takes the training script's optimizer: here the flags' AdamW
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
    if (betas && !p.is_auto(*betas, "betas", strf("(%g, %g)", o.adam_beta1, o.adam_beta2))) {
        bool ok = betas->is_array() && betas->size() == 2;
        for (size_t i = 0; ok && i < 2; i++)
            ok = (*betas)[i].is_number() && (*betas)[i].as_number() >= 0.0 && (*betas)[i].as_number() < 1.0;
        if (!ok) p.bad(*betas, "betas", "an array of two numbers in [0, 1), like [0.9, 0.95]");
        o.adam_beta1 = (float)(*betas)[0].as_number();
        o.adam_beta2 = (float)(*betas)[1].as_number();
    }
    p.get_number("eps", 0.0, 1.0, true, o.adam_eps, "a number in (0, 1]");
    bool bias_correction = !p.has("bias_correction") || o.adam_bias_correction;  // DeepSpeed's default: true
    p.get_bool("bias_correction", bias_correction);
    o.adam_bias_correction = bias_correction;
    bool flag = false;
    if (p.get_bool("adam_w_mode", flag) && !flag)
        p.unsupported(*p.get("adam_w_mode"), "adam_w_mode",
                      "weight decay is always decoupled (AdamW), never added to the gradient");
    if (p.get_bool("amsgrad", flag) && flag)
        p.unsupported(*p.get("amsgrad"), "amsgrad", "the optimizer is plain AdamW");
    p.finish();
    opt.finish();
}

// DeepSpeed's schedules, which learning_rate_at (zero/run/run_setup.h) computes as its
// lr_schedules do, with its defaults for what params leaves out. Without a scheduler
// section, or without its type, DeepSpeed runs none: the optimizer's lr throughout.
void apply_scheduler(Section& top, TrainOptions& o) {
    Section sch = top.section("scheduler");
    std::string type;
    if (sch.present() && !sch.get_string("type", type))
        note(sch.notes(), "scheduler without a type: DeepSpeed runs none (its params are ignored), nor does this run");
    if (!type.empty() && type != "WarmupLR" && type != "WarmupDecayLR" && type != "WarmupCosineLR")
        sch.unsupported(*sch.get("type"), "type",
                        "the schedules here are DeepSpeed's WarmupLR, WarmupDecayLR and WarmupCosineLR (spelt as "
                        "DeepSpeed spells them; its OneCycle and LRRangeTest, and torch's, are not implemented)");
    Section p = sch.section("params");  // (absent: DeepSpeed's defaults; DeepSpeed itself stops without params)
    sch.finish();
    if (type.empty()) {
        o.lr_schedule = "cosine", o.warmup_steps = 0, o.final_lr_frac = 1.0f;  // -u 0 -q 1: the lr throughout
        return;
    }
    o.lr_schedule = type;
    if (!p.has("warmup_num_steps")) o.warmup_steps = 1000;
    if (!p.has("warmup_type")) o.warmup_type = "log";
    p.get_int("warmup_num_steps", 0, INT_MAX, o.warmup_steps, "an integer >= 0");
    if (p.get_string("warmup_type", o.warmup_type) && o.warmup_type != "log" && o.warmup_type != "linear") {
        note(sch.notes(), "scheduler.params.warmup_type \"%s\" is neither log nor linear: log, as DeepSpeed "
             "falls back to", o.warmup_type.c_str());
        o.warmup_type = "log";
    }
    if (type != "WarmupLR" && !p.has("total_num_steps"))
        fail("%s: DeepSpeed's %s needs scheduler.params.total_num_steps, the step its decay ends at",
             sch.get("type")->where().c_str(), type.c_str());
    if (type != "WarmupLR")
        p.get_int("total_num_steps", 1, INT_MAX, o.total_num_steps, "an integer >= 1",
                  o.total_num_steps ? nullptr : "(the run's)");
    if (type == "WarmupCosineLR") {  // fractions of the optimizer's lr
        if (!p.has("warmup_min_ratio")) o.warmup_min_ratio = 0.0f;
        if (!p.has("cos_min_ratio")) o.final_lr_frac = 0.0001f;
        p.get_number("warmup_min_ratio", 0.0, 1.0, false, o.warmup_min_ratio, "a number in [0, 1]");
        p.get_number("cos_min_ratio", 0.0, 1.0, false, o.final_lr_frac, "a number in [0, 1]");
    } else {  // rates: warmup_max_lr (WarmupLR's default: the optimizer's lr) is -l, warmup_min_lr a fraction of it
        if (type == "WarmupDecayLR" && !p.has("warmup_max_lr")) o.learning_rate = 0.001f;
        p.get_number("warmup_max_lr", 0.0, INFINITY, false, o.learning_rate, "a number >= 0");
        float min_lr = p.has("warmup_min_lr") ? o.warmup_min_ratio * o.learning_rate : 0.0f;
        p.get_number("warmup_min_lr", 0.0, INFINITY, false, min_lr, "a number >= 0");
        if (min_lr > 0 && o.learning_rate == 0) p.bad(*p.get("warmup_min_lr"), "warmup_min_lr", "0 with max 0");
        o.warmup_min_ratio = o.learning_rate > 0 ? min_lr / o.learning_rate : 0.0f;
    }
    note(sch.notes(), "scheduler %s as DeepSpeed computes it: %s warmup, then %s", type.c_str(), o.warmup_type.c_str(),
         type == "WarmupLR" ? "constant" : type == "WarmupDecayLR" ? "linear decay back to warmup_min_lr"
                                                                    : "cosine decay to cos_min_ratio x lr");
    p.finish();
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
    off.finish();
}

void apply_zero(Section& top, TrainOptions& o) {
    // DeepSpeed's defaults, with or without the section: stage 0, no offload
    Section z = top.section("zero_optimization");
    if (!z.has("stage")) o.zero_stage = 0;
    if (!z.has("offload_optimizer")) o.offload_optimizer = "none";
    if (!z.has("offload_param")) o.offload_param = "none";
    if (!z.present()) return;
    z.get_int("stage", 0, 3, o.zero_stage, "an integer 0, 1, 2 or 3");
    apply_offload_optimizer(z, o);
    apply_offload_param(z, o);
    bool cpu = false;  // DeepSpeed's older spellings of offload_optimizer and offload_param with device cpu
    if (z.get_bool("cpu_offload", cpu) && cpu) o.offload_optimizer = "cpu";
    if (z.get_bool("cpu_offload_param", cpu) && cpu) o.offload_param = "cpu";
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
    long long block = o.nvme_block_kib * 1024LL;
    if (!aio.has("block_size")) o.nvme_block_kib = 1024;
    if (aio.get_int("block_size", 1, 1LL << 30, block, block_expected)) {
        if (block % 4096 != 0) aio.bad(*aio.get("block_size"), "block_size", block_expected);
        o.nvme_block_kib = (int)(block / 1024);
    }
    if (!aio.has("queue_depth")) o.nvme_queue_depth = 8;
    aio.get_int("queue_depth", 1, 1024, o.nvme_queue_depth, "an integer in 1..1024");
    // intra_op_parallelism is thread_count's newer name: either, or both agreeing
    int threads = o.nvme_threads, older = o.nvme_threads;
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
    bool split = false;
    if (ac.get_bool("partition_activations", split)) o.partition_activations = split ? 1 : 0;
    if (split && (o.tp <= 1 || o.recompute != 2))
        note(ac.notes(), "%s = true does nothing without --tp > 1 and -r 2 (it splits each saved layer input across "
             "the tensor-parallel group)", ac.name("partition_activations").c_str());
    ac.finish();
}

}  // namespace

void apply_deepspeed_json(const JsonValue& root, TrainOptions& o, bool notes) {
    if (!root.is_object())
        fail("%s: a DeepSpeed config is a JSON object {...}, not %s", root.where().c_str(), root.type_name());
    Notes said;
    said.on = notes;
    Section top(&root, "", &said);
    apply_batch(top, o);
    apply_precision(top, o);
    apply_optimizer(top, o);
    apply_scheduler(top, o);
    apply_zero(top, o);
    apply_aio(top, o);  // after apply_zero: it reads only with nvme offload
    apply_activation_checkpointing(top, o);
    top.finish();
    said.print();
}

void apply_deepspeed_config(const std::string& path, TrainOptions& o, bool notes) {
    CHECK(file_exists(path), "DeepSpeed config %s does not exist", path.c_str());
    // a bound on what is held: a config is a few KiB, and a parsed document takes ~100 bytes per value
    const std::string text = read_file_bytes(path, 1 << 20);
    CHECK(text.size() <= 1 << 20, "DeepSpeed config %s is larger than 1 MiB: not a config (those are a few KiB)",
          path.c_str());
    apply_deepspeed_json(parse_json(text, path, true), o, notes);  // with comments and trailing commas, as hjson
}
