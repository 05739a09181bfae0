// Hugging Face checkpoints in and out (zero/layout/safetensors.h, hf_gpt2.h,
// --from_hf, --export_hf), on a tiny GPT-2 trained for a few steps:
//
//   round trip   model file -> --export_hf -> --from_hf (-x 0 -o) -> model file, bit-identical;
//                the same from a sharded checkpoint through --consolidate --export_hf
//   logits       the export, read by dev/hf_reference.py (struct + json + torch, not our
//                reader) into the PyTorch GPT-2 of dev/gpt2_reference.py, gives our logits
//                within 1e-5
//   dtypes       F16 and BF16 files read exactly; the released checkpoints' naming (no
//                "transformer." prefix, causal-mask buffers, a tied lm_head.weight) accepted
//   bad files    each kind of malformed safetensors or config.json refused with one line
//
// usage: test_hf <train_gpt2_zero_cpu> <dev/hf_reference.py>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "test/child_process.h"
#include "test/trainer_run.h"
#include "zero/comm/comm_emulated.h"
#include "zero/layout/hf_gpt2.h"
#include "zero/model/gpt2.h"

namespace {

void write_bytes(const std::string& path, const std::string& data) {
    FILE* f = open_file(path, "wb");
    write_exact(f, data.data(), data.size(), path);
    fclose(f);
}

// A safetensors file from a header text and a data section.
void write_raw_safetensors(const std::string& path, const std::string& header, size_t data_bytes,
                           uint64_t claimed_len = 0) {
    std::string out(8, '\0');
    const uint64_t len = claimed_len ? claimed_len : header.size();
    for (int i = 0; i < 8; ++i) out[i] = (char)(len >> (8 * i));
    write_bytes(path, out + header + std::string(data_bytes, '\0'));
}

// Our logits (B*T, V) for model file `model` on the given tokens.
std::vector<float> our_logits(const std::string& model, const std::vector<int>& inputs,
                              const std::vector<int>& targets, int B, int T) {
    ModelFile mf(model);
    const GPT2Config cfg = mf.cfg;
    const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    std::vector<float> logits((size_t)B * T * V);
    ParamLayout layout(cfg);
    run_emulated_ranks(1, [&](int rank, EmulatedWorld& world) {
        KernelCtx comm_ctx;
        EmulatedComm comm(world, rank, comm_ctx);
        MemoryAccountant mem(rank);
        KernelCtx ctx = create_kernel_ctx(mem, (size_t)B * T, cfg.channels, cfg.num_heads);
        ZeroConfig zc;
        zc.stage = 0;
        ZeroEngine<float> zero(layout, comm, mem, ctx, zc);
        GPT2<float> gpt(zero, B, T, 0, false, mem);
        zero.load_parameters([&](int u, float* dst) { mf.read_unit(layout, u, dst); });
        gpt.forward(inputs.data(), targets.data(), B, T, 0.0f);
        for (int i = 0; i < B * T; i++)
            for (int v = 0; v < V; v++) logits[(size_t)i * V + v] = gpt.acts.logits[(size_t)i * Vp + v];
        destroy_kernel_ctx(ctx);
    });
    return logits;
}

void test_export_and_back(const std::string& trainer, const std::string& script) {
    const std::string dir = "hf";
    fresh_dir(dir);
    const int B = 2, T = 64;
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);

    // a model with some training behind it, so its logits are far from uniform
    TrainerRun train(trainer);
    train.model = TINY_T64, train.train = dir + "/train.bin", train.out = dir + "/run";
    train.micro_batch = B, train.seq_len = T, train.steps = 8;
    train.extra = "-l 1e-2";
    const std::string model = train.run().model_at(8);

    // ours -> HF -> ours
    CommandResult exp = run_command(trainer + " -e " + model + " --export_hf " + dir + "/export");
    EXPECT(exp.status == 0, "--export_hf failed:\n%s", exp.output.c_str());
    TrainerRun back(trainer);
    back.extra = "--from_hf " + dir + "/export";
    back.train = dir + "/train.bin", back.out = dir + "/back";
    back.micro_batch = B, back.seq_len = T, back.steps = 0;
    const std::string back_model = back.run().model_at(0);
    EXPECT(files_identical(model, back_model), "model file -> HF -> model file is not bit-identical (%s vs %s)",
           model.c_str(), back_model.c_str());
    // the same through two tensor-parallel ranks: each cuts its part of every tensor from the folder
    TrainerRun back_tp = back;
    back_tp.out = dir + "/back_tp", back_tp.ranks = 2, back_tp.extra += " --tp 2";
    EXPECT(files_identical(model, back_tp.run().model_at(0)), "--from_hf with --tp 2 does not start from the model");

    // a sharded checkpoint (2 ranks, stage 3) consolidated straight into a folder:
    // its fp32 masters, as --consolidate's model file holds them
    TrainerRun sharded(trainer);
    sharded.model = TINY_T64, sharded.train = dir + "/train.bin", sharded.out = dir + "/sharded";
    sharded.micro_batch = B, sharded.seq_len = T, sharded.steps = 2, sharded.stage = 3, sharded.ranks = 2;
    sharded.run();
    const std::string ckpt = checkpoint_dir(dir + "/sharded", 2);
    CommandResult cons = run_command(trainer + " --consolidate " + ckpt + " --export_hf " + dir + "/consolidated");
    EXPECT(cons.status == 0, "--consolidate --export_hf failed:\n%s", cons.output.c_str());
    TrainerRun cons_back(trainer);
    cons_back.extra = "--from_hf " + dir + "/consolidated";
    cons_back.train = dir + "/train.bin", cons_back.out = dir + "/consolidated_back";
    cons_back.micro_batch = B, cons_back.seq_len = T, cons_back.steps = 0;
    EXPECT(files_identical(ckpt + "/model_fp32.bin", cons_back.run().model_at(0)),
           "--consolidate --export_hf: the folder does not hold the consolidated model");

    // the export through an independent reader and the PyTorch model
    if (run_command(reference_python() + " -c 'import torch'").status != 0) {
        printf("note: PyTorch is not installed: the export's logits are not checked\n");
        return;
    }
    std::vector<int> inputs, targets;
    first_batch(dir + "/train.bin", B, T, dir + "/tokens.bin", inputs, targets);
    const std::vector<float> ours = our_logits(model, inputs, targets, B, T);
    CommandResult ref = run_command(reference_python() + " " + script + " " + dir + "/export " + dir + "/tokens.bin " +
                                    dir + "/ref_logits.bin");
    EXPECT(ref.status == 0, "dev/hf_reference.py failed:\n%s", ref.output.c_str());
    if (ref.status != 0) return;
    printf("%s", ref.output.c_str());
    std::vector<float> theirs(ours.size());
    FILE* f = open_file(dir + "/ref_logits.bin", "rb");
    EXPECT(file_size(f) == theirs.size() * 4, "hf_reference.py wrote %zu bytes", file_size(f));
    read_exact(f, theirs.data(), theirs.size() * 4, dir + "/ref_logits.bin");
    fclose(f);
    double max_diff = 0, max_ref = 0;
    for (size_t i = 0; i < ours.size(); ++i) {
        max_diff = std::max(max_diff, (double)std::fabs(ours[i] - theirs[i]));
        max_ref = std::max(max_ref, (double)std::fabs(theirs[i]));
    }
    printf("exported model through PyTorch: max |logit| %.3f, max |ours - torch| = %.3g (%.3g relative)\n", max_ref,
           max_diff, max_diff / max_ref);
    EXPECT(max_ref > 1.0, "the logits are too small (%.3g) for the comparison to mean much", max_ref);
    EXPECT(max_diff <= 1e-5, "the exported model's logits differ from ours by %.3g", max_diff);
}

// An HF folder for `cfg` written tensor by tensor, values i * 1e-3 - 0.5 in HF's
// layout, in the given dtype and naming.
void write_folder(const std::string& dir, const GPT2Config& cfg, const std::string& dtype, const std::string& prefix,
                  bool released_extras) {
    make_dir(dir);
    ParamLayout layout(cfg);
    SafetensorsWriter w;
    auto value = [](size_t i) { return (float)((int)(i % 1000)) * 1e-3f - 0.5f; };
    auto add = [&](const std::string& name, const std::vector<int64_t>& shape) {
        size_t n = 1;
        for (int64_t d : shape) n *= (size_t)d;
        if (dtype == "F32") {
            std::vector<float> v(n);
            for (size_t i = 0; i < n; ++i) v[i] = value(i);
            w.add_f32(name, shape, v);
        } else {
            std::vector<uint16_t> v(n);
            for (size_t i = 0; i < n; ++i)
                v[i] = dtype == "BF16" ? bf16_from_float(value(i)).bits : float_to_half_bits(value(i));
            w.add(name, dtype, shape, v.data(), v.size(), 2);
        }
    };
    for (int u = 0; u < layout.num_units(); ++u)
        for (const TensorSpec& t : layout.unit_spec(u).tensors) {
            HfTensorName hf = hf_tensor_name(cfg, t.id, t.layer);
            add(prefix + hf.name, hf.shape);
        }
    if (released_extras) {
        for (int l = 0; l < cfg.num_layers; ++l)
            add("h." + std::to_string(l) + ".attn.bias", {1, 1, cfg.max_seq_len, cfg.max_seq_len});
        add("lm_head.weight", {cfg.vocab_size, cfg.channels});  // the same values as wte: tied
    }
    w.write(dir + "/model.safetensors");
    write_bytes(dir + "/config.json", hf_config_json(cfg));
}

void test_dtypes_and_names() {
    const GPT2Config cfg = gpt2_config_from_descriptor("L=2,H=2,C=16,V=100,T=8");
    ParamLayout layout(cfg);
    for (const char* dtype : {"F32", "F16", "BF16"}) {
        for (bool released : {false, true}) {
            const std::string dir = std::string("hf_") + dtype + (released ? "_released" : "");
            write_folder(dir, cfg, dtype, released ? "" : "transformer.", released);
            HfGpt2Reader hf(dir);
            size_t wrong = 0, checked = 0;
            for (int u = 0; u < layout.num_units(); ++u) {
                std::vector<float> unit(layout.unit_spec(u).numel, -7.0f);
                hf.read_unit(layout, u, unit.data());
                for (const TensorSpec& t : layout.unit_spec(u).tensors) {
                    HfTensorName name = hf_tensor_name(cfg, t.id, t.layer);
                    const size_t n = t.id == WTE ? (size_t)cfg.vocab_size * cfg.channels : t.numel;
                    for (size_t i = 0; i < t.numel; ++i) {
                        // our element i is HF's element j (transposed tensors swap the indices)
                        size_t j = i;
                        if (name.transposed) {
                            const size_t rows = name.shape[1], cols = name.shape[0];  // ours: (out, in)
                            j = (i % cols) * rows + i / cols;
                        }
                        const float v = (float)((int)(j % 1000)) * 1e-3f - 0.5f;
                        const float want = i >= n ? 0.0f
                                           : std::string(dtype) == "BF16" ? to_float(bf16_from_float(v))
                                           : std::string(dtype) == "F16"  ? half_bits_to_float(float_to_half_bits(v))
                                                                          : v;
                        wrong += unit[t.offset_in_unit + i] != want;
                        ++checked;
                    }
                }
            }
            EXPECT(wrong == 0, "%s: %zu of %zu values read wrongly", dir.c_str(), wrong, checked);
        }
    }
}

void test_bad_files() {
    const GPT2Config cfg = gpt2_config_from_descriptor("L=1,H=2,C=16,V=100,T=8");
    const std::string ok_header = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
    write_raw_safetensors("st_ok.safetensors", ok_header, 16);
    EXPECT(SafetensorsReader("st_ok.safetensors").read_f32("a", {2, 2}).size() == 4, "a good file reads");

    write_raw_safetensors("st_len_huge.safetensors", ok_header, 16, 1ull << 40);
    expect_failure("header length", [] { SafetensorsReader r("st_len_huge.safetensors"); }, "bad header length");
    write_raw_safetensors("st_len_short.safetensors", ok_header, 16, 5);
    expect_failure("header length inside the JSON", [] { SafetensorsReader r("st_len_short.safetensors"); },
                   "st_len_short.safetensors");
    write_bytes("st_tiny.safetensors", "abc");
    expect_failure("too short", [] { SafetensorsReader r("st_tiny.safetensors"); }, "too short");
    write_raw_safetensors("st_array.safetensors", "[1, 2]", 0);
    expect_failure("not an object", [] { SafetensorsReader r("st_array.safetensors"); }, "not a JSON object");
    write_raw_safetensors("st_overlap.safetensors",
                          "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                          "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
                          24);
    expect_failure("overlapping offsets", [] { SafetensorsReader r("st_overlap.safetensors"); }, "overlaps");
    write_raw_safetensors("st_range.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                          8);
    expect_failure("out-of-range offsets", [] { SafetensorsReader r("st_range.safetensors"); }, "out of range");
    write_raw_safetensors("st_hole.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                          16);
    expect_failure("a hole", [] { SafetensorsReader r("st_hole.safetensors"); }, "a hole of 8 bytes");
    write_raw_safetensors("st_span.safetensors", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]}}",
                          16);
    expect_failure("shape against offsets", [] { SafetensorsReader r("st_span.safetensors"); }, "needs 12");
    write_raw_safetensors("st_dtype.safetensors", "{\"a\":{\"dtype\":\"F33\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                          16);
    expect_failure("unknown dtype", [] { SafetensorsReader r("st_dtype.safetensors"); }, "unknown dtype \"F33\"");
    write_raw_safetensors("st_i32.safetensors", "{\"a\":{\"dtype\":\"I32\",\"shape\":[4],\"data_offsets\":[0,16]}}",
                          16);
    expect_failure("wrong dtype", [] { SafetensorsReader("st_i32.safetensors").read_f32("a", {4}); },
                   "has dtype I32");
    expect_failure("wrong shape", [] { SafetensorsReader("st_ok.safetensors").read_f32("a", {4}); },
                   "has shape [2, 2]; expected [4]");
    expect_failure("missing tensor", [] { SafetensorsReader("st_ok.safetensors").read_f32("b", {4}); },
                   "missing tensor \"b\"");

    // whole folders
    write_folder("hf_good", cfg, "F32", "transformer.", false);
    HfGpt2Reader good("hf_good");
    EXPECT(good.cfg.channels == 16 && good.cfg.num_layers == 1, "config.json read");
    auto folder_without = [&](const std::string& dir, const std::string& skip, const std::string& dtype,
                              const std::vector<int64_t>& bad_shape) {
        make_dir(dir);
        SafetensorsReader src("hf_good/model.safetensors");
        SafetensorsWriter w;
        for (const SafetensorsTensor& t : src.tensors()) {
            if (t.name == skip && bad_shape.empty() && dtype.empty()) continue;
            if (t.name == skip && !bad_shape.empty()) {
                size_t n = 1;
                for (int64_t d : bad_shape) n *= (size_t)d;
                w.add_f32(t.name, bad_shape, std::vector<float>(n));
            } else if (t.name == skip) {
                w.add(t.name, dtype, t.shape, std::vector<uint16_t>(t.numel()).data(), t.numel(), 2);
            } else {
                w.add_f32(t.name, t.shape, src.read_f32(t.name, t.shape));
            }
        }
        w.write(dir + "/model.safetensors");
        write_bytes(dir + "/config.json", hf_config_json(cfg));
    };
    folder_without("hf_missing", "transformer.h.0.mlp.c_fc.bias", "", {});
    expect_failure("HF: missing tensor", [] { HfGpt2Reader r("hf_missing"); },
                   "missing tensor \"transformer.h.0.mlp.c_fc.bias\"");
    folder_without("hf_shape", "transformer.h.0.attn.c_attn.weight", "", {48, 16});  // ours, not Conv1D's
    expect_failure("HF: wrong shape", [] { HfGpt2Reader r("hf_shape"); }, "has the wrong shape");
    write_folder("hf_untied", cfg, "F32", "transformer.", false);
    {
        SafetensorsReader src("hf_untied/model.safetensors");
        SafetensorsWriter w;
        for (const SafetensorsTensor& t : src.tensors()) w.add_f32(t.name, t.shape, src.read_f32(t.name, t.shape));
        w.add_f32("lm_head.weight", {100, 16}, std::vector<float>(1600, 0.25f));
        w.write("hf_untied/model.safetensors");
    }
    expect_failure("HF: untied head", [] { HfGpt2Reader r("hf_untied"); }, "untied LM head");
    write_folder("hf_gelu", cfg, "F32", "transformer.", false);
    std::string json = hf_config_json(cfg);
    json.replace(json.find("gelu_new"), 8, "relu");
    write_bytes("hf_gelu/config.json", json);
    expect_failure("HF: activation", [] { HfGpt2Reader r("hf_gelu"); }, "activation_function must be");
    expect_failure("HF: no folder", [] { HfGpt2Reader r("hf_nowhere"); }, "hf_nowhere/config.json");
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args = test_args(argc, argv, "<train_gpt2_zero_cpu> <dev/hf_reference.py>");
    test_bad_files();
    test_dtypes_and_names();
    test_export_and_back("OMP_NUM_THREADS=1 " + args[0], args[1]);  // tiny runs: one thread each
    // the trainer refuses a bad folder with one line
    CommandResult bad = run_command("OMP_NUM_THREADS=1 " + args[0] + " --from_hf hf_missing -x 0");
    EXPECT(bad.status == 1 && bad.output.find("error: ") == 0 &&
               std::count(bad.output.begin(), bad.output.end(), '\n') == 1,
           "--from_hf of a bad folder: expected one error line, got (status %d):\n%s", bad.status, bad.output.c_str());
    return test_summary("test_hf");
}
