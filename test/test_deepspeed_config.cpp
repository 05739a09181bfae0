// The JSON parser (zero/base/json.h) and the DeepSpeed config mapping
// (zero/run/deepspeed_config.h): valid and invalid JSON, the options a full
// DeepSpeed config sets, and a one-line error for every value it cannot honour.
// Code that ends in fail() runs in a forked child; the test checks its exit
// status (1) and its stderr (one line, with the expected text).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "test/test_util.h"
#include "test/child_process.h"
#include "zero/run/deepspeed_config.h"
#include "zero/run/flags.h"
#include "zero/run/run_setup.h"
#include "zero/base/json.h"

namespace {

void expect_parse_error(const std::string& text, const std::string& part) {
    expect_failure("parse " + text.substr(0, 40), [&] { parse_json(text, "t.json"); }, part);
}

bool near(double a, double b) { return std::fabs(a - b) <= 1e-12 * std::max(1.0, std::fabs(b)); }

// ----------------------------------------------------------------------------
// JSON: valid documents

void test_json_valid() {
    // nesting, member order, types
    JsonValue v = parse_json(R"({"a": {"b": [1, [2, {"c": null}]], "d": true}, "e": false, "f": "x", "g": []})");
    EXPECT(v.is_object() && v.size() == 4, "top-level object of 4 members");
    const char* keys[] = {"a", "e", "f", "g"};
    for (int i = 0; i < 4; i++) EXPECT(v.members()[i].key == keys[i], "member %d is %s", i, keys[i]);
    const JsonValue& b = *v.find("a")->find("b");
    EXPECT(b.is_array() && b.size() == 2 && b[0].as_number() == 1.0, "a.b = [1, ...]");
    EXPECT(b[1][1].find("c")->is_null(), "a.b[1][1].c is null");
    EXPECT(v.find("a")->find("d")->as_bool() == true && v.find("e")->as_bool() == false, "booleans");
    EXPECT(v.find("f")->as_string() == "x", "string");
    EXPECT(v.find("g")->is_array() && v.find("g")->size() == 0, "empty array");
    EXPECT(v.find("zzz") == nullptr && !v.has("zzz"), "absent key");
    EXPECT(parse_json("{}").is_object() && parse_json("{}").size() == 0, "empty object");

    // scalars at the top, whitespace of all four kinds
    EXPECT(parse_json(" \t\r\n 42 \n\t").as_number() == 42.0, "top-level number with whitespace");
    EXPECT(parse_json("\"s\"").as_string() == "s", "top-level string");
    EXPECT(parse_json("null").is_null() && parse_json("true").as_bool(), "top-level literals");
    EXPECT(parse_json("\r\n[ 1 ,\t2 ,\n 3 ]\r\n").size() == 3, "array with whitespace everywhere");
    EXPECT(parse_json("\xEF\xBB\xBF{\"a\":1}").has("a"), "byte-order mark skipped");

    // escapes
    EXPECT(parse_json(R"("\"\\\/\b\f\n\r\t")").as_string() == "\"\\/\b\f\n\r\t", "simple escapes");
    // \uXXXX: ASCII, 2-byte, 3-byte, a surrogate pair (U+1F600), NUL, upper/lower hex
    EXPECT(parse_json(R"("\u0041\u00e9\u4E2D\uD83D\uDE00")").as_string() == "A\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80",
           "unicode escapes");
    EXPECT(parse_json(R"("a\u0000b")").as_string() == std::string("a\0b", 3), "\\u0000 kept");
    EXPECT(parse_json(R"("\uDBFF\uDFFF")").as_string() == "\xF4\x8F\xBF\xBF", "U+10FFFF from a surrogate pair");
    // raw UTF-8 passes through unchanged
    EXPECT(parse_json("\"caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80\"").as_string() ==
               "caf\xC3\xA9 \xE4\xB8\xAD \xF0\x9F\x98\x80",
           "raw UTF-8");
    EXPECT(parse_json(R"({"k\u00e9y": 1})").has("k\xC3\xA9y"), "escaped key");

    // numbers
    EXPECT(near(parse_json("-0.5e-3").as_number(), -0.0005), "-0.5e-3");
    EXPECT(parse_json("-0").as_number() == 0.0 && std::signbit(parse_json("-0").as_number()), "-0");
    EXPECT(parse_json("0").as_number() == 0.0, "0");
    EXPECT(near(parse_json("1E+2").as_number(), 100.0) && near(parse_json("1e2").as_number(), 100.0), "1E+2");
    EXPECT(near(parse_json("3.25").as_number(), 3.25) && near(parse_json("10E-1").as_number(), 1.0), "fractions");
    EXPECT(near(parse_json("3e-4").as_number(), 3e-4), "3e-4");
    EXPECT(parse_json("1e-400").as_number() == 0.0, "underflow to 0 is fine");
    EXPECT(parse_json("-0.5e-3").number_text() == "-0.5e-3", "number text kept");
    JsonValue big = parse_json("9007199254740993");  // 2^53 + 1: not a double
    EXPECT(big.as_integer() == 9007199254740993LL, "integer literal read exactly");
    EXPECT(parse_json("2.0").is_integer_in(0, 10) && parse_json("2e0").is_integer_in(0, 10), "2.0 is an integer");
    EXPECT(!parse_json("2.5").is_integer_in(0, 10), "2.5 is not an integer");
    EXPECT(!parse_json("11").is_integer_in(0, 10) && !parse_json("-1").is_integer_in(0, 10), "range");
    EXPECT(!parse_json("99999999999999999999").is_integer_in(LLONG_MIN, LLONG_MAX), "beyond long long");
    EXPECT(!parse_json("\"3\"").is_integer_in(0, 10), "a string is not an integer");

    // positions
    JsonValue p = parse_json("{\n  \"a\": [1,\n        \"x\"],\n  \"\xC3\xA9\": 7\n}", "pos.json");
    EXPECT(p.find("a")->where() == "pos.json:2:8", "a at 2:8, got %s", p.find("a")->where().c_str());
    EXPECT((*p.find("a"))[1].where() == "pos.json:3:9", "a[1] at 3:9, got %s", (*p.find("a"))[1].where().c_str());
    EXPECT(p.find("\xC3\xA9")->where() == "pos.json:4:8", "columns count characters, got %s",
           p.find("\xC3\xA9")->where().c_str());

    // deep but allowed nesting
    std::string deep = std::string(200, '[') + std::string(200, ']');
    EXPECT(parse_json(deep).is_array(), "200 levels");
}

// ----------------------------------------------------------------------------
// JSON: invalid documents, each a one-line error with line:column

void test_json_invalid() {
    expect_parse_error("", "t.json:1:1: expected a value, found end of input");
    expect_parse_error("   \n  ", "t.json:2:3: expected a value");
    expect_parse_error(R"({"a": 1,})", "t.json:1:9: trailing comma before '}'");
    expect_parse_error("[1, 2,]", "t.json:1:7: trailing comma before ']'");
    expect_parse_error("[1, 2, ]", "trailing comma");
    expect_parse_error("[,]", "t.json:1:2: expected a value, found ','");
    expect_parse_error(R"({,})", "expected a member name");
    expect_parse_error(R"("abc)", "t.json:1:1: unterminated string");
    expect_parse_error("{\"a\": \"abc\n\"}", "t.json:1:7: unterminated string (a string cannot span lines");
    expect_parse_error("\"a\tb\"", "t.json:1:3: control character 0x09");
    expect_parse_error(R"("\x")", "t.json:1:2: invalid escape \\x");
    expect_parse_error(R"("\')", "invalid escape \\'");
    expect_parse_error(R"("\u12")", "\\u needs four hex digits, found '\"'");
    expect_parse_error(R"("\u12G4")", "\\u needs four hex digits, found 'G'");
    expect_parse_error(R"("\uD800")", "t.json:1:2: high surrogate \\uD800 is not followed");
    expect_parse_error(R"("\uD800\u0041")", "is followed by \\u0041");
    expect_parse_error(R"("x\uDC00")", "t.json:1:3: lone low surrogate \\uDC00");
    expect_parse_error("\"\xFF\"", "invalid UTF-8 (byte 0xFF)");
    expect_parse_error("\"\xC0\xAF\"", "overlong");
    expect_parse_error("\"\xED\xA0\x80\"", "surrogate");  // U+D800 encoded directly
    expect_parse_error("\"\xC3\"", "invalid UTF-8");
    expect_parse_error("01", "t.json:1:1: a number must not have a leading zero");
    expect_parse_error("[-01]", "t.json:1:3: a number must not have a leading zero");
    expect_parse_error("-", "expected a digit after '-'");
    expect_parse_error("1.", "expected a digit after the decimal point");
    expect_parse_error("1.e5", "expected a digit after the decimal point");
    expect_parse_error(".5", "t.json:1:1: expected a value, found '.'");
    expect_parse_error("+1", "expected a value, found '+'");
    expect_parse_error("1e", "expected a digit in the exponent");
    expect_parse_error("1e+", "expected a digit in the exponent");
    expect_parse_error("1e400", "t.json:1:1: number 1e400 is out of range");
    expect_parse_error("NaN", "expected a value, found 'N'");
    expect_parse_error("[Infinity]", "expected a value, found 'I'");
    expect_parse_error("tru", "t.json:1:1: expected a value, found 'tru'");
    expect_parse_error("nullx", "found 'nullx'");
    expect_parse_error("True", "found 'T'");
    expect_parse_error(R"({"a": 1, "a": 2})", "t.json:1:10: duplicate key \"a\"");
    expect_parse_error("{} x", "t.json:1:4: unexpected 'x' after the JSON value");
    expect_parse_error("[1] ]", "unexpected ']' after the JSON value");
    expect_parse_error("1 2", "unexpected '2' after the JSON value");
    expect_parse_error(R"({'a': 1})", "expected a member name in double quotes, found '''");
    expect_parse_error(R"({a: 1})", "expected a member name in double quotes, found 'a'");
    expect_parse_error(R"({"a" 1})", "t.json:1:6: expected ':' after member name \"a\"");
    expect_parse_error(R"({"a": 1 "b": 2})", "t.json:1:9: expected ',' or '}' in an object, found '\"'");
    expect_parse_error("[1 2]", "t.json:1:4: expected ',' or ']' in an array");
    expect_parse_error(R"({"a": 1)", "t.json:1:1: unterminated object");
    expect_parse_error("[1, [2, 3]", "t.json:1:1: unterminated array");
    expect_parse_error("// comment\n{}", "t.json:1:1: expected a value, found '/'");
    expect_parse_error("{\n  \"a\": 1,\n  \"b\": ,\n}", "t.json:3:8: expected a value, found ','");
    expect_parse_error(std::string(300, '[') + std::string(300, ']'), "nesting deeper than 256 levels");
    // the accessors refuse other types
    expect_failure("as_string of a number", [] { parse_json("[1]", "t.json")[0].as_string(); },
                   "t.json:1:2: expected a string, found a number");
    expect_failure("a missing file", [] { parse_json_file("no_such_dir/ds.json"); }, "cannot open no_such_dir/ds.json");
}

// ----------------------------------------------------------------------------
// the DeepSpeed mapping

const char* FULL_CONFIG = R"({ "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2,
  "gradient_clipping": 1.0,
  "bf16": {"enabled": true},
  "fp16": {"enabled": false, "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1},
  "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
  "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": true}, "offload_param": {"device": "cpu", "pin_memory": true}},
  "activation_checkpointing": {"partition_activations": false, "cpu_checkpointing": true} })";

void apply_text(const std::string& text, TrainOptions& o, bool notes = false) {
    apply_deepspeed_json(parse_json(text, "ds.json"), o, notes);
}

void test_full_config() {
    TrainOptions o;
    o.micro_batch = 16;  // set before: the file overrides it
    o.grad_clip = 0.0f;
    o.zero_stage = 1;
    o.max_steps = 7;  // not in the file: kept
    o.total_batch = 4096;  // an earlier -d: the file's batch replaces it
    o.adam_beta1 = o.adam_beta2 = o.adam_eps = 0.5f;  // set before: the file overrides them
    apply_text(FULL_CONFIG, o);
    EXPECT_EQ(o.micro_batch, 4);
    EXPECT_EQ(o.grad_accum, 2);
    EXPECT_EQ(o.train_batch_seqs, 0L);
    EXPECT_EQ(o.total_batch, -1L);
    EXPECT(o.grad_clip == 1.0f, "grad_clip %g", o.grad_clip);
    EXPECT(o.precision == "bf16", "precision %s", o.precision.c_str());
    EXPECT(o.loss_scale == 0.0f && o.initial_scale_power == 16 && o.loss_scale_window == 1000 && o.hysteresis == 2 &&
               o.min_loss_scale == 1.0f,
           "fp16 scaler fields");
    EXPECT(o.learning_rate == 3e-4f && o.weight_decay == 0.1f, "lr %g wd %g", o.learning_rate, o.weight_decay);
    EXPECT(o.adam_beta1 == 0.9f && o.adam_beta2 == 0.95f, "betas %g %g", o.adam_beta1, o.adam_beta2);
    EXPECT(o.adam_eps == 1e-8f, "eps %g", o.adam_eps);
    EXPECT_EQ(o.zero_stage, 3);
    EXPECT(o.offload_optimizer == "cpu" && o.offload_param == "cpu", "offload %s %s", o.offload_optimizer.c_str(),
           o.offload_param.c_str());
    EXPECT_EQ(o.recompute, 2);
    EXPECT_EQ(o.offload_activations, 1);
    EXPECT_EQ(o.partition_activations, 0);  // ZeRO-R's Pa, where --tp and -r 2 make it mean something
    EXPECT_EQ(o.max_steps, 7);
    EXPECT(o.warmup_steps == 0 && o.final_lr_frac == 1.0f, "schedule untouched");
    EXPECT_EQ(deepspeed_total_batch(o.grad_accum, o.train_batch_seqs, o.micro_batch, 1024, 2), 4L * 1024 * 2 * 2);

    // the same through a file, with its notes: the full config prints the
    // cpu_checkpointing note and the folded line of keys with no effect here
    {
        FILE* f = open_file("ds_full.json", "wb");
        fputs(FULL_CONFIG, f);
        fclose(f);
        ChildResult r = run_in_child([] {
            TrainOptions o2;
            apply_deepspeed_config("ds_full.json", o2);
            if (o2.zero_stage != 3 || o2.precision != "bf16") _exit(3);
        });
        EXPECT(r.status == 0, "full config from a file: status %d, stderr %s", r.status, r.err.c_str());
        EXPECT(std::count(r.err.begin(), r.err.end(), '\n') == 2 &&
                   r.err.find("note: activation_checkpointing.cpu_checkpointing = true: recomputing whole blocks (-r 2)") == 0 &&
                   r.err.find("\nnote: no effect here (each tunes what this trainer does one fixed way; "
                              "zero/run/deepspeed_keys.cpp says how): zero_optimization.offload_optimizer.pin_memory, "
                              "zero_optimization.offload_param.pin_memory\n") != std::string::npos,
               "two notes: %s", r.err.c_str());
    }

    // an empty config means DeepSpeed's defaults where they differ from the
    // flags' (stage 0, fp32, no clipping, no offload) and changes nothing else
    TrainOptions d, e;
    e.zero_stage = 3, e.precision = "bf16", e.grad_clip = 1.0f, e.offload_optimizer = "cpu";
    apply_text("{}", e);
    EXPECT(e.zero_stage == 0 && e.precision == "fp32" && e.grad_clip == 0.0f && e.offload_optimizer == "none" &&
               e.offload_param == "none",
           "{}: DeepSpeed's defaults: stage %d, %s, clip %g, offload %s", e.zero_stage, e.precision.c_str(),
           e.grad_clip, e.offload_optimizer.c_str());
    EXPECT(e.micro_batch == d.micro_batch && e.learning_rate == d.learning_rate && e.adam_beta1 == d.adam_beta1 &&
               e.adam_beta2 == d.adam_beta2 && e.adam_eps == d.adam_eps && e.grad_accum == d.grad_accum &&
               e.train_batch_seqs == d.train_batch_seqs && e.total_batch == d.total_batch,
           "{} changes nothing else (no optimizer section: the flags' AdamW)");
}

// DeepSpeed's defaults where a section leaves a value out
void test_deepspeed_defaults() {
    TrainOptions o;  // the flags' defaults: stage 1, betas (0.9, 0.95), clip 1
    apply_text(R"({"optimizer": {"type": "AdamW", "params": {"lr": 2e-4}}, "bf16": {"enabled": true}})", o);
    EXPECT(o.zero_stage == 0, "no zero_optimization: stage %d, DeepSpeed's is 0", o.zero_stage);
    EXPECT(o.adam_beta1 == 0.9f && o.adam_beta2 == 0.999f && o.adam_eps == 1e-8f && o.weight_decay == 0.0f,
           "AdamW without betas, eps, weight_decay: (%g, %g), %g, %g; DeepSpeed's are (0.9, 0.999), 1e-8, 0",
           o.adam_beta1, o.adam_beta2, o.adam_eps, o.weight_decay);
    EXPECT(o.learning_rate == 2e-4f && o.grad_clip == 0.0f && o.precision == "bf16", "lr %g clip %g",
           o.learning_rate, o.grad_clip);
    TrainOptions p;
    apply_text(R"({"optimizer": {"type": "Adam"}, "zero_optimization": {"overlap_comm": true}})", p);
    EXPECT(p.learning_rate == 1e-3f && p.zero_stage == 0, "Adam without params: lr %g (DeepSpeed's 1e-3), stage %d",
           p.learning_rate, p.zero_stage);
}

// DeepSpeed's three batch rules, resolved with the world size after all flags
void test_batch_rules() {
    auto resolved = [](const char* json, int world, int b_before, int b_after = 0) {
        TrainOptions o;
        o.micro_batch = b_before;
        o.seq_len = 64;
        apply_text(json, o);
        if (b_after) o.micro_batch = b_after, o.derive_micro_batch = 0;  // what a later -b does
        resolve_deepspeed_batch(o, world);
        return std::make_pair(o.micro_batch, o.total_batch / 64);  // micro-batch, sequences per step
    };
    // train_batch_size alone: micro-batch = train_batch_size / world, no accumulation, whatever -b said before
    EXPECT(resolved(R"({"train_batch_size": 4})", 4, 4) == std::make_pair(1, 4L), "train_batch_size 4 on 4 ranks");
    EXPECT(resolved(R"({"train_batch_size": 32})", 2, 4) == std::make_pair(16, 32L), "train_batch_size 32 on 2 ranks");
    // train_batch_size and accumulation: micro = tb / (accum x world)
    EXPECT(resolved(R"({"train_batch_size": 32, "gradient_accumulation_steps": 4})", 2, 7) == std::make_pair(4, 32L),
           "tb 32, accumulation 4, 2 ranks");
    // train_batch_size and micro-batch: accumulation = tb / (micro x world)
    EXPECT(resolved(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2})", 2, 7) == std::make_pair(2, 32L),
           "tb 32, micro 2, 2 ranks");
    // micro-batch and accumulation: tb = micro x accum x world
    EXPECT(resolved(R"({"train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 5})", 2, 7) ==
               std::make_pair(3, 30L),
           "micro 3, accumulation 5, 2 ranks");
    // all three agreeing
    EXPECT(resolved(R"({"train_batch_size": 24, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 4})",
                    2, 7) == std::make_pair(3, 24L),
           "all three");
    // a -b after the file is the micro-batch given
    EXPECT(resolved(R"({"train_batch_size": 32})", 2, 4, 8) == std::make_pair(8, 32L), "tb 32, then -b 8");
    expect_failure("tb not divisible by world", [&] { resolved(R"({"train_batch_size": 6})", 4, 4); },
                   "DeepSpeed train_batch_size (6) must be divisible by gradient_accumulation_steps x world size = 1 x 4");
    expect_failure("all three disagree",
                   [&] {
                       resolved(R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 3, "gradient_accumulation_steps": 4})",
                                2, 7);
                   },
                   "train_batch_size (32) must equal micro-batch x gradient_accumulation_steps x world size = 3 x 4 x 2 = 24");
}

// With tensor or pipeline parallelism DeepSpeed's world size in the batch keys
// is the data-parallel degree (its runtime/config.py divides the world by the
// model-parallel ranks): the flags and the config through parse_flags,
// resolve_batch and make_run_setup, as the trainer takes them.
void test_model_parallel_batch() {
    auto setup = [](const char* json, const std::vector<std::string>& flags) {
        FILE* f = open_file("ds_mp_batch.json", "wb");
        fputs(json, f);
        fclose(f);
        std::vector<std::string> args = {"prog", "-e", "L=2,H=12,C=96,V=384,T=32", "-t", "32",
                                         "--deepspeed_config", "ds_mp_batch.json"};
        args.insert(args.end(), flags.begin(), flags.end());
        std::vector<char*> argv;
        for (std::string& a : args) argv.push_back(&a[0]);
        TrainOptions o;
        parse_flags((int)argv.size(), argv.data(), o);
        resolve_batch(o);
        RunSetup r = make_run_setup(o);
        return std::make_tuple(o.micro_batch, r.micro_steps, o.total_batch / 32);  // B, accumulation, sequences
    };
    const char* micro2_accum2 = R"({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2})";
    // 4 ranks, 2 data-parallel: 2 x 2 x 2 = 8 sequences a step in 2 micro-steps
    EXPECT(setup(micro2_accum2, {"--ranks", "4", "--tp", "2"}) == std::make_tuple(2, 2, 8L), "micro 2, accum 2, tp 2");
    EXPECT(setup(micro2_accum2, {"--ranks", "4", "--pp", "2"}) == std::make_tuple(2, 2, 8L), "micro 2, accum 2, pp 2");
    EXPECT(setup(micro2_accum2, {"--ranks", "8", "--tp", "2", "--pp", "2"}) == std::make_tuple(2, 2, 8L),
           "micro 2, accum 2, tp 2 x pp 2");
    EXPECT(setup(micro2_accum2, {"--ranks", "4"}) == std::make_tuple(2, 2, 16L), "micro 2, accum 2, 4 data ranks");
    // grids whose data-parallel degree is not their tensor-parallel one (where dividing the world by
    // the wrong one of the two would still have given the right answer above)
    EXPECT(setup(micro2_accum2, {"--ranks", "8", "--tp", "2"}) == std::make_tuple(2, 2, 16L),
           "micro 2, accum 2, 8 ranks at tp 2: 4 data ranks");
    EXPECT(setup(micro2_accum2, {"--ranks", "6", "--tp", "3"}) == std::make_tuple(2, 2, 8L),
           "micro 2, accum 2, 6 ranks at tp 3: 2 data ranks");
    EXPECT(setup(R"({"train_batch_size": 24})", {"--ranks", "8", "--tp", "2"}) == std::make_tuple(6, 1, 24L),
           "train_batch_size 24 alone over 4 data ranks: micro-batch 6");
    EXPECT(setup(R"({"train_batch_size": 24, "gradient_accumulation_steps": 3})", {"--ranks", "6", "--tp", "3"}) ==
               std::make_tuple(4, 3, 24L),
           "train_batch_size 24 in 3 micro-steps over 2 data ranks: micro-batch 4");
    // train_batch_size 4 with micro 2 on 2 data-parallel ranks: one micro-step (the world of 4 would refuse it)
    EXPECT(setup(R"({"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2})", {"--ranks", "4", "--tp", "2"}) ==
               std::make_tuple(2, 1, 4L),
           "train_batch_size 4, micro 2, tp 2");
    EXPECT(setup(R"({"train_batch_size": 8})", {"--ranks", "4", "--pp", "2"}) == std::make_tuple(4, 1, 8L),
           "train_batch_size 8 alone over 2 data ranks: micro-batch 4");
    expect_failure("train_batch_size not a multiple of the data-parallel ranks", [&] {
        setup(R"({"train_batch_size": 3})", {"--ranks", "4", "--tp", "2"});
    }, "DeepSpeed train_batch_size (3) must be divisible by gradient_accumulation_steps x world size = 1 x 2");
}

// The header line saying what the config decided and what flags after it did
void test_option_sources() {
    FILE* f = open_file("ds_sources.json", "wb");
    fputs(R"({"train_batch_size": 8, "zero_optimization": {"stage": 2}, "optimizer": {"type": "AdamW", "params": {"lr": 5e-4}}})", f);
    fclose(f);
    const char* argv[] = {"prog", "-b", "4", "--ranks", "2", "-t", "16", "--deepspeed_config", "ds_sources.json", "-l", "1e-3"};
    TrainOptions o;
    ChildResult r = run_in_child([&] {
        parse_flags(11, (char**)argv, o);
        resolve_batch(o);
        print_option_sources(o, stderr);
        if (o.micro_batch != 4 || o.total_batch != 8 * 16 || o.zero_stage != 2 || o.learning_rate != 1e-3f) _exit(3);
    });
    EXPECT(r.status == 0, "parse_flags with a config: status %d: %s", r.status, r.err.c_str());
    for (const char* part : {"from ds_sources.json (DeepSpeed's meaning and defaults):", " --micro_batch 4",
                             " --total_batch 128", " --zero_stage 2", " --adam_beta2 0.999", " --grad_clip 0",
                             "from flags after it: --lr 0.001"})
        EXPECT(r.err.find(part) != std::string::npos, "header lacks '%s':\n%s", part, r.err.c_str());
    EXPECT(r.err.find("--lr 0.0005") == std::string::npos, "the overridden lr is reported as the config's");
}

void expect_config_error(const char* what, const std::string& text, const std::string& part);

void test_notes() {
    // A note that changes the run is a line of its own; the keys with no effect here, the sections of
    // features this trainer lacks and the "auto" keys (with the values they keep) are one line each
    ChildResult r = run_in_child([] {
        TrainOptions o;
        o.adam_beta1 = 0.7f;  // betas "auto": kept
        o.learning_rate = 6e-4f;  // warmup_max_lr "auto": kept
        apply_text(R"({"steps_per_print": 10, "wall_clock_breakdown": false,
                       "zero_optimization": {"stage": 2, "overlap_comm": true, "reduce_bucket_size": 5e8,
                                             "allgather_bucket_size": 5e8, "contiguous_gradients": true,
                                             "sub_group_size": 1e9,
                                             "offload_optimizer": {"device": "cpu", "pin_memory": false, "buffer_count": 4}},
                       "optimizer": {"type": "adam", "params": {"lr": 0.001, "torch_adam": true, "betas": "auto"}},
                       "activation_checkpointing": {"partition_activations": true, "number_checkpoints": 4},
                       "train_micro_batch_size_per_gpu": "auto",
                       "fp16": {"enabled": "auto", "hysteresis": 3},
                       "tensorboard": {"enabled": true, "output_path": "x"},
                       "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_max_lr": "auto", "warmup_num_steps": 7,
                                                                         "total_num_steps": 100}}})",
                   o, true);
        if (o.zero_stage != 2 || o.offload_optimizer != "cpu" || o.learning_rate != 0.001f || o.micro_batch != 4 ||
            o.adam_beta1 != 0.7f || o.adam_beta2 != TrainOptions{}.adam_beta2 || o.precision != "" ||
            o.hysteresis != 3 || o.warmup_steps != 7 || o.lr_schedule != "WarmupDecayLR" || o.partition_activations != 1)
            _exit(3);
    });
    EXPECT(r.status == 0, "notes: status %d, stderr %s", r.status, r.err.c_str());
    const char* expected[] = {
        "note: activation_checkpointing: recomputation is chosen with -r",
        "note: activation_checkpointing.partition_activations = true does nothing without --tp > 1 and -r 2 (it "
        "splits each saved layer input across the tensor-parallel group)\n",
        "note: scheduler WarmupDecayLR as DeepSpeed computes it: log warmup, then linear decay back to warmup_min_lr\n",
        "note: ignoring DeepSpeed sections of features this trainer lacks: tensorboard\n",
        "note: \"auto\" keeps this trainer's values: train_micro_batch_size_per_gpu 4, fp16.enabled (the build's "
        "default precision), optimizer.params.betas (0.7, 0.95), scheduler.params.warmup_max_lr 0.001\n",
        "note: no effect here (each tunes what this trainer does one fixed way; zero/run/deepspeed_keys.cpp says how): "
        "optimizer.params.torch_adam, zero_optimization.offload_optimizer.pin_memory, "
        "zero_optimization.offload_optimizer.buffer_count, zero_optimization.overlap_comm, "
        "zero_optimization.reduce_bucket_size, zero_optimization.allgather_bucket_size, "
        "zero_optimization.contiguous_gradients, zero_optimization.sub_group_size, "
        "activation_checkpointing.number_checkpoints, steps_per_print, wall_clock_breakdown\n",
    };
    for (const char* e : expected) EXPECT(r.err.find(e) != std::string::npos, "missing \"%s\" in:\n%s", e, r.err.c_str());
    EXPECT(std::count(r.err.begin(), r.err.end(), '\n') == (long)(sizeof(expected) / sizeof(expected[0])),
           "one line per note:\n%s", r.err.c_str());
    EXPECT(r.err.find("error") == std::string::npos, "no errors: %s", r.err.c_str());

    // notes=false is silent
    ChildResult q = run_in_child([] {
        TrainOptions o;
        apply_text(R"({"steps_per_print": 10, "scheduler": {"type": "WarmupLR"}})", o, false);
    });
    EXPECT(q.status == 0 && q.err.empty(), "notes=false: status %d, stderr %s", q.status, q.err.c_str());

    // a key DeepSpeed's checked sections do not take is an error, naming the known key a typo away
    expect_config_error("stgae", R"({"zero_optimization": {"stgae": 3}})",
                        "ds.json:1:33: zero_optimization.stgae (did you mean zero_optimization.stage?): "
                        "a key this trainer does not read");
    expect_config_error("params typo", R"({"optimizer": {"type": "AdamW", "params": {"weight_decya": 0.1}}})",
                        "optimizer.params.weight_decya (did you mean optimizer.params.weight_decay?)");
}

void test_precision() {
    auto precision_of = [](const char* text, const char* before) {
        TrainOptions o;
        o.precision = before;
        apply_text(text, o);
        return o.precision;
    };
    EXPECT(precision_of(R"({"fp16": {"enabled": true}})", "") == "fp16", "fp16");
    EXPECT(precision_of(R"({"bf16": {"enabled": true}, "fp16": {"enabled": false}})", "fp16") == "bf16", "bf16");
    EXPECT(precision_of(R"({"bfloat16": {"enabled": true}})", "") == "bf16", "bfloat16 (older name)");
    EXPECT(precision_of(R"({"bf16": {"enabled": false}})", "bf16") == "fp32", "bf16 off alone: fp32");
    EXPECT(precision_of(R"({"fp16": {"loss_scale": 128}})", "bf16") == "fp32", "enabled absent: false");
    EXPECT(precision_of(R"({"fp16": {"enabled": false}, "bf16": {"enabled": false}})", "") == "fp32", "both off");
    EXPECT(precision_of(R"({"gradient_clipping": 0.5})", "fp16") == "fp32", "no precision sections: DeepSpeed's fp32");
    EXPECT(precision_of(R"({"bf16": {"enabled": "auto"}})", "fp16") == "fp16", "auto: kept");
    EXPECT(precision_of(R"({"amp": {"enabled": false}})", "bf16") == "fp32", "amp off: fine, and fp32");

    TrainOptions o;
    apply_text(R"({"fp16": {"enabled": true, "loss_scale": 1024.5, "initial_scale_power": 12, "loss_scale_window": 50,
                   "hysteresis": 1, "min_loss_scale": 0.25, "consecutive_hysteresis": false}})",
               o);
    EXPECT(o.precision == "fp16" && o.loss_scale == 1024.5f && o.initial_scale_power == 12 &&
               o.loss_scale_window == 50 && o.hysteresis == 1 && o.min_loss_scale == 0.25f,
           "fp16 fields");
}

void test_scheduler_and_misc() {
    {
        // integers written as 2.0, offload none, cpu_offload, cpu_checkpointing false
        TrainOptions o;
        o.offload_param = "cpu";
        o.offload_activations = 1;
        apply_text(R"({"train_micro_batch_size_per_gpu": 2.0, "train_batch_size": 64,
                       "zero_optimization": {"stage": 0, "offload_param": {"device": "none"}, "cpu_offload": true},
                       "activation_checkpointing": {"cpu_checkpointing": false},
                       "optimizer": {"type": "ADAMW", "params": {"betas": [0.8, 0.999], "eps": 1e-6,
                                                                 "adam_w_mode": true, "amsgrad": false}}})",
                   o);
        EXPECT(o.micro_batch == 2 && o.train_batch_seqs == 64 && o.grad_accum == 0 && o.total_batch == -1 &&
                   o.zero_stage == 0 && o.offload_param == "none" && o.offload_optimizer == "cpu" &&
                   o.offload_activations == 0 && o.recompute == 0,
               "misc mapping");
        EXPECT(o.adam_beta1 == 0.8f && o.adam_beta2 == 0.999f && o.adam_eps == 1e-6f, "betas, eps");
    }
}

void test_total_batch() {
    EXPECT_EQ(deepspeed_total_batch(0, 0, 4, 64, 2), -1);
    EXPECT_EQ(deepspeed_total_batch(3, 0, 4, 64, 2), 4L * 64 * 2 * 3);
    EXPECT_EQ(deepspeed_total_batch(0, 32, 4, 64, 2), 32L * 64);
    EXPECT_EQ(deepspeed_total_batch(4, 32, 4, 64, 2), 32L * 64);
    EXPECT_EQ(deepspeed_total_batch(0, 8, 4, 1024, 1), 8L * 1024);
    expect_failure("train_batch_size inconsistent", [] { deepspeed_total_batch(2, 32, 4, 64, 2); },
                   "train_batch_size (32) must equal micro-batch x gradient_accumulation_steps x world size = 4 x 2 x 2 = 16");
    expect_failure("train_batch_size not a multiple", [] { deepspeed_total_batch(0, 30, 4, 64, 2); },
                   "train_batch_size (30) must be a multiple of micro-batch x world size = 4 x 2");
}

void expect_config_error(const char* what, const std::string& text, const std::string& part) {
    expect_failure(what,
                   [&] {
                       TrainOptions o;
                       apply_text(text, o, true);
                   },
                   part);
}

void test_config_errors() {
    // wrong JSON types name the key
    expect_config_error("stage as a string", R"({"zero_optimization": {"stage": "3"}})",
                        "ds.json:1:33: DeepSpeed key zero_optimization.stage must be an integer 0, 1, 2 or 3 (got \"3\" (a string))");
    expect_config_error("micro batch as a string", R"({"train_micro_batch_size_per_gpu": "4"})",
                        "DeepSpeed key train_micro_batch_size_per_gpu must be an integer >= 1 (got \"4\" (a string))");
    expect_config_error("gradient_clipping as a string", R"({"gradient_clipping": "1.0"})",
                        "DeepSpeed key gradient_clipping must be a number >= 0 (0: no clipping) (got \"1.0\" (a string))");
    expect_config_error("enabled as a number", R"({"bf16": {"enabled": 1}})",
                        "DeepSpeed key bf16.enabled must be true or false (got 1)");
    expect_config_error("bf16 as a bool", R"({"bf16": true})", "DeepSpeed key bf16 must be an object (got true)");
    expect_config_error("zero_optimization as an array", R"({"zero_optimization": [3]})",
                        "DeepSpeed key zero_optimization must be an object (got an array)");
    expect_config_error("optimizer type as null", R"({"optimizer": {"type": null}})",
                        "DeepSpeed key optimizer.type must be a string (got null)");
    expect_config_error("device as a bool", R"({"zero_optimization": {"offload_param": {"device": true}}})",
                        "DeepSpeed key zero_optimization.offload_param.device must be a string (got true)");
    expect_config_error("lr as a string", R"({"optimizer": {"params": {"lr": "3e-4"}}})",
                        "DeepSpeed key optimizer.params.lr must be a number >= 0");
    expect_config_error("config is an array", "[1]", "ds.json:1:1: a DeepSpeed config is a JSON object {...}, not an array");

    // values out of range
    expect_config_error("stage 4", R"({"zero_optimization": {"stage": 4}})",
                        "DeepSpeed key zero_optimization.stage must be an integer 0, 1, 2 or 3 (got 4)");
    expect_config_error("micro batch 0", R"({"train_micro_batch_size_per_gpu": 0})",
                        "train_micro_batch_size_per_gpu must be an integer >= 1 (got 0)");
    expect_config_error("micro batch 2.5", R"({"train_micro_batch_size_per_gpu": 2.5})",
                        "train_micro_batch_size_per_gpu must be an integer >= 1 (got 2.5)");
    expect_config_error("micro batch too large", R"({"train_micro_batch_size_per_gpu": 3000000000})",
                        "train_micro_batch_size_per_gpu must be an integer >= 1 (got 3000000000)");
    expect_config_error("accumulation -1", R"({"gradient_accumulation_steps": -1})",
                        "gradient_accumulation_steps must be an integer >= 1 (got -1)");
    expect_config_error("train_batch_size 0", R"({"train_batch_size": 0})", "train_batch_size must be an integer >= 1");
    expect_config_error("negative clip", R"({"gradient_clipping": -1})", "gradient_clipping must be a number >= 0");
    expect_config_error("initial_scale_power 61", R"({"fp16": {"initial_scale_power": 61}})",
                        "fp16.initial_scale_power must be an integer in 0..60 (got 61)");
    expect_config_error("min_loss_scale 0", R"({"fp16": {"min_loss_scale": 0}})", "fp16.min_loss_scale must be a number > 0");
    expect_config_error("hysteresis 0", R"({"fp16": {"hysteresis": 0}})", "fp16.hysteresis must be an integer >= 1");
    expect_config_error("betas of one", R"({"optimizer": {"params": {"betas": [0.9]}}})",
                        "DeepSpeed key optimizer.params.betas must be an array of two numbers in [0, 1), like [0.9, 0.95] (got an array)");
    expect_config_error("betas of strings", R"({"optimizer": {"params": {"betas": ["0.9", "0.95"]}}})",
                        "optimizer.params.betas must be an array of two numbers");
    expect_config_error("beta 1.0", R"({"optimizer": {"params": {"betas": [0.9, 1.0]}}})",
                        "optimizer.params.betas must be an array of two numbers in [0, 1)");
    expect_config_error("eps 0", R"({"optimizer": {"params": {"eps": 0}}})", "optimizer.params.eps must be a number in (0, 1] (got 0)");
    expect_config_error("cos_min_ratio 2", R"({"scheduler": {"type": "WarmupCosineLR", "params": {"cos_min_ratio": 2,
                                                                  "total_num_steps": 9}}})",
                        "scheduler.params.cos_min_ratio must be a number in [0, 1] (got 2)");
    expect_config_error("warmup -5", R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": -5}}})",
                        "scheduler.params.warmup_num_steps must be an integer >= 0 (got -5)");

    // known keys with values this trainer cannot honour
    expect_config_error("gpu offload", R"({"zero_optimization": {"offload_optimizer": {"device": "gpu"}}})",
                        "zero_optimization.offload_optimizer.device must be \"cpu\", \"nvme\" or \"none\" (got \"gpu\" (a string))");
    expect_config_error("gpu param offload", R"({"zero_optimization": {"offload_param": {"device": "gpu"}}})",
                        "zero_optimization.offload_param.device must be \"cpu\" or \"none\" (got \"gpu\" (a string))");
    expect_config_error("Lamb", R"({"optimizer": {"type": "Lamb", "params": {"lr": 1e-3}}})",
                        "DeepSpeed key optimizer.type = \"Lamb\" (a string) is not supported: this trainer's optimizer is AdamW");
    expect_config_error("OneBitAdam", R"({"optimizer": {"type": "OneBitAdam"}})", "optimizer.type = \"OneBitAdam\"");
    expect_config_error("adam_w_mode false", R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})",
                        "optimizer.params.adam_w_mode = false is not supported");
    expect_config_error("amsgrad", R"({"optimizer": {"params": {"amsgrad": true}}})",
                        "optimizer.params.amsgrad = true is not supported");
    expect_config_error("bf16 and fp16", R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})",
                        "ds.json:1:49: DeepSpeed config enables both bf16 and fp16; enable at most one");
    expect_config_error("bf16 and bfloat16", R"({"bf16": {"enabled": true}, "bfloat16": {"enabled": true}})",
                        "has both bf16 and bfloat16 sections");
    expect_config_error("amp", R"({"amp": {"enabled": true, "opt_level": "O1"}})", "amp.enabled = true is not supported");
    expect_config_error("consecutive_hysteresis", R"({"fp16": {"consecutive_hysteresis": true}})",
                        "fp16.consecutive_hysteresis = true is not supported");

    // files: missing, and a parse error that names the file and position (comments and trailing
    // commas are DeepSpeed's hjson, and read: test_deepspeed_corpus.cpp)
    expect_failure("missing config", [] {
        TrainOptions o;
        apply_deepspeed_config("no_such_ds.json", o);
    }, "DeepSpeed config no_such_ds.json does not exist");
    FILE* f = open_file("ds_bad.json", "wb");
    fputs("{\n  \"zero_optimization\": {\"stage\" 3},\n}\n", f);
    fclose(f);
    expect_failure("bad file", [] {
        TrainOptions o;
        apply_deepspeed_config("ds_bad.json", o);
    }, "ds_bad.json:2:33: expected ':' after member name \"stage\", found '3'");
}

// NVMe offload: offload_optimizer.device nvme with its path and buffers, the
// aio section, and what nvme cannot be here (parameters, GPUDirect Storage)
const char* NVME_CONFIG = R"({"zero_optimization": {"stage": 3,
    "offload_optimizer": {"device": "nvme", "nvme_path": "states_dir", "pin_memory": true, "buffer_count": 6},
    "offload_param": {"device": "cpu", "pin_memory": true}},
  "aio": {"block_size": 262144, "queue_depth": 32, "intra_op_parallelism": 3, "use_gds": false}})";

void test_nvme_offload() {
    {
        TrainOptions o;
        o.nvme_fraction = 0.5;  // no DeepSpeed key: kept
        apply_text(NVME_CONFIG, o);
        EXPECT(o.offload_optimizer == "nvme" && o.offload_param == "cpu" && o.zero_stage == 3, "offload %s %s, stage %d",
               o.offload_optimizer.c_str(), o.offload_param.c_str(), o.zero_stage);
        EXPECT(o.nvme_path == "states_dir", "nvme_path %s", o.nvme_path.c_str());
        EXPECT_EQ(o.nvme_buffers, 6);
        EXPECT_EQ(o.nvme_block_kib, 256);
        EXPECT_EQ(o.nvme_queue_depth, 32);
        EXPECT_EQ(o.nvme_threads, 3);
        EXPECT(o.nvme_fraction == 0.5, "nvme_fraction %g", o.nvme_fraction);
    }
    {
        // what the file leaves out is DeepSpeed's default, whatever flags before it said
        TrainOptions o;
        o.nvme_buffers = 9, o.nvme_block_kib = 64, o.nvme_queue_depth = 2, o.nvme_threads = 5;
        apply_text(R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme", "nvme_path": "d"}}})", o);
        EXPECT(o.nvme_buffers == 4 && o.nvme_block_kib == 1024 && o.nvme_queue_depth == 8 && o.nvme_threads == 1,
               "DeepSpeed's defaults: buffers %d, block %d KiB, depth %d, threads %d", o.nvme_buffers, o.nvme_block_kib,
               o.nvme_queue_depth, o.nvme_threads);
    }
    {
        // device "auto" keeps an earlier --offload_optimizer nvme, and its --nvme_path
        TrainOptions o;
        o.offload_optimizer = "nvme", o.nvme_path = "from_flag";
        apply_text(R"({"zero_optimization": {"offload_optimizer": {"device": "auto", "buffer_count": 2}}})", o);
        EXPECT(o.offload_optimizer == "nvme" && o.nvme_path == "from_flag" && o.nvme_buffers == 2,
               "auto: %s %s %d", o.offload_optimizer.c_str(), o.nvme_path.c_str(), o.nvme_buffers);
    }
    {
        // thread_count is intra_op_parallelism's older name; both agreeing is fine
        TrainOptions o, p;
        const char* older = R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": "d"}},
                                "aio": {"thread_count": 7}})";
        apply_text(older, o);
        EXPECT_EQ(o.nvme_threads, 7);
        apply_text(R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": "d"}},
                       "aio": {"thread_count": 2, "intra_op_parallelism": 2}})",
                   p);
        EXPECT_EQ(p.nvme_threads, 2);
    }
    {
        // through the flags: the header line names what the file set, and a flag after it wins
        FILE* f = open_file("ds_nvme.json", "wb");
        fputs(NVME_CONFIG, f);
        fclose(f);
        const char* argv[] = {"prog", "--nvme_threads", "8", "--deepspeed_config", "ds_nvme.json", "--nvme_queue_depth", "4"};
        ChildResult r = run_in_child([&] {
            TrainOptions o;
            parse_flags(7, (char**)argv, o);
            print_option_sources(o, stderr);
            if (o.offload_optimizer != "nvme" || o.nvme_threads != 3 || o.nvme_queue_depth != 4 || o.nvme_block_kib != 256)
                _exit(3);
        });
        EXPECT(r.status == 0, "nvme config through the flags: status %d: %s", r.status, r.err.c_str());
        for (const char* part : {" --offload_optimizer nvme", " --nvme_path states_dir", " --nvme_buffers 6",
                                 " --nvme_threads 3", " --nvme_block_kib 256", "from flags after it: --nvme_queue_depth 4"})
            EXPECT(r.err.find(part) != std::string::npos, "header lacks '%s':\n%s", part, r.err.c_str());
    }

    // nvme's notes: keys this trainer has no use for, in the folded line
    ChildResult r = run_in_child([] {
        TrainOptions o;
        apply_text(R"({"zero_optimization": {"stage": 3,
                         "offload_optimizer": {"device": "nvme", "nvme_path": "d", "pipeline_read": true,
                                               "pipeline_write": true, "fast_init": false},
                         "offload_param": {"device": "cpu", "buffer_size": 1e8, "max_in_cpu": 1e9}},
                       "aio": {"block_size": 1048576, "single_submit": false, "overlap_events": true}})",
                   o, true);
        if (o.offload_optimizer != "nvme" || o.nvme_block_kib != 1024) _exit(3);
    });
    EXPECT(r.status == 0, "nvme notes: status %d, stderr %s", r.status, r.err.c_str());
    const char* expected[] = {
        "note: no effect here (each tunes what this trainer does one fixed way; zero/run/deepspeed_keys.cpp says how): "
        "zero_optimization.offload_optimizer.pipeline_read, zero_optimization.offload_optimizer.pipeline_write, "
        "zero_optimization.offload_optimizer.fast_init, zero_optimization.offload_param.buffer_size, "
        "zero_optimization.offload_param.max_in_cpu, aio.single_submit, aio.overlap_events\n",
    };
    for (const char* e : expected) EXPECT(r.err.find(e) != std::string::npos, "missing \"%s\" in:\n%s", e, r.err.c_str());
    EXPECT(std::count(r.err.begin(), r.err.end(), '\n') == (long)(sizeof(expected) / sizeof(expected[0])),
           "one line per note:\n%s", r.err.c_str());

    // without nvme offload the aio section changes nothing: noted, the options as they were
    ChildResult q = run_in_child([] {
        TrainOptions o;
        o.nvme_threads = 5;
        apply_text(R"({"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu", "nvme_path": "d"}},
                       "aio": {"block_size": 1000, "thread_count": 2, "use_gds": true}})",
                   o, true);
        if (o.offload_optimizer != "cpu" || o.nvme_threads != 5 || o.nvme_block_kib != 1024 || !o.nvme_path.empty())
            _exit(3);
    });
    EXPECT(q.status == 0, "aio without nvme: status %d, stderr %s", q.status, q.err.c_str());
    const char* expected_cpu[] = {
        "note: no effect here (each tunes what this trainer does one fixed way; zero/run/deepspeed_keys.cpp says how): "
        "zero_optimization.offload_optimizer.nvme_path, aio.block_size, aio.thread_count, aio.use_gds\n",
    };
    for (const char* e : expected_cpu)
        EXPECT(q.err.find(e) != std::string::npos, "missing \"%s\" in:\n%s", e, q.err.c_str());
    EXPECT(std::count(q.err.begin(), q.err.end(), '\n') == (long)(sizeof(expected_cpu) / sizeof(expected_cpu[0])),
           "one line per note:\n%s", q.err.c_str());

    // what nvme offload cannot be here
    expect_config_error("nvme without nvme_path", R"({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})",
                        "ds.json:1:56: DeepSpeed key zero_optimization.offload_optimizer.nvme_path is missing: device "
                        "\"nvme\" needs the directory the optimizer states live in");
    expect_config_error("empty nvme_path",
                        R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": ""}}})",
                        "DeepSpeed key zero_optimization.offload_optimizer.nvme_path must be a directory on the disk");
    expect_config_error("nvme param offload",
                        R"({"zero_optimization": {"offload_param": {"device": "nvme", "nvme_path": "/x"}}})",
                        "DeepSpeed key zero_optimization.offload_param.device = \"nvme\" (a string) is not supported: "
                        "stage 3's parameter slices are read by every forward and backward pass, so they stay in host "
                        "memory here: use offload_param.device \"cpu\" with offload_optimizer.device \"nvme\"");
    const std::string nvme = R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": "d"}}, )";
    expect_config_error("use_gds", nvme + R"("aio": {"use_gds": true}})",
                        "DeepSpeed key aio.use_gds = true is not supported: GPUDirect Storage needs cuFile");
    expect_config_error("block_size 1000", nvme + R"("aio": {"block_size": 1000}})",
                        "DeepSpeed key aio.block_size must be a positive multiple of 4096 (bytes), at most 1073741824 (got 1000)");
    expect_config_error("block_size 6144", nvme + R"("aio": {"block_size": 6144}})",
                        "aio.block_size must be a positive multiple of 4096 (bytes)");
    expect_config_error("block_size 0", nvme + R"("aio": {"block_size": 0}})",
                        "aio.block_size must be a positive multiple of 4096 (bytes)");
    expect_config_error("thread_count and intra_op_parallelism differ",
                        nvme + R"("aio": {"intra_op_parallelism": 4, "thread_count": 2}})",
                        "DeepSpeed keys aio.intra_op_parallelism (4) and aio.thread_count (2) are one setting "
                        "(thread_count is its older name); keep one");
    expect_config_error("buffer_count 0",
                        R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": "d", "buffer_count": 0}}})",
                        "zero_optimization.offload_optimizer.buffer_count must be an integer in 1..64 (got 0)");
    expect_config_error("queue_depth as a string", nvme + R"("aio": {"queue_depth": "8"}})",
                        "aio.queue_depth must be an integer in 1..1024 (got \"8\" (a string))");
    expect_config_error("offload typo", R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": "d",
                                                                                  "buffer_cont": 8}}})",
                        "zero_optimization.offload_optimizer.buffer_cont (did you mean "
                        "zero_optimization.offload_optimizer.buffer_count?): a key this trainer does not read");
}

}  // namespace

void test_deepspeed_corpus();  // test_deepspeed_corpus.cpp

int main() {
    test_json_valid();
    test_json_invalid();
    test_full_config();
    test_notes();
    test_deepspeed_defaults();
    test_batch_rules();
    test_model_parallel_batch();
    test_option_sources();
    test_precision();
    test_scheduler_and_misc();
    test_total_batch();
    test_config_errors();
    test_nvme_offload();
    test_deepspeed_corpus();
    return test_summary("deepspeed_config");
}
