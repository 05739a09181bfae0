// Hugging Face's GPT-2 checkpoints (a folder with config.json and
// model.safetensors, what transformers' GPT2LMHeadModel.save_pretrained writes
// and from_pretrained reads), mapped onto our parameter layout.
//
// The tensors' names and shapes are hf_tensor_name's. HF's Conv1D stores a
// linear map's weight as (in, out), ours is (out, in) like llm.c's, so a
// layer's four linear weights are transposed; HF's wte has V rows, ours Vp
// (rows V..Vp-1 zero). Names carry the prefix "transformer." in files written
// by GPT2LMHeadModel, and none in the released checkpoints (written from
// GPT2Model); we read both and write the former. The LM head is tied to wte: a
// file's lm_head.weight, if any, must equal wte. Other tensors (the released
// files' causal-mask buffers h.l.attn.bias) are ignored. Values may be F32,
// F16 or BF16; we write F32.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/json.h"
#include "zero/layout/param_layout.h"
#include "zero/layout/safetensors.h"

// HF's name (without prefix) and shape of tensor t of layer `layer`, and
// whether HF stores it transposed relative to us.
struct HfTensorName {
    std::string name;
    std::vector<int64_t> shape;
    bool transposed = false;
};

inline HfTensorName hf_tensor_name(const GPT2Config& c, int t, int layer) {
    const int64_t C = c.channels;
    const std::string h = "h." + std::to_string(layer) + ".";
    switch (t) {
        case WTE: return {"wte.weight", {c.vocab_size, C}};
        case WPE: return {"wpe.weight", {c.max_seq_len, C}};
        case LN1W: return {h + "ln_1.weight", {C}};
        case LN1B: return {h + "ln_1.bias", {C}};
        case QKVW: return {h + "attn.c_attn.weight", {C, 3 * C}, true};
        case QKVB: return {h + "attn.c_attn.bias", {3 * C}};
        case ATTPROJW: return {h + "attn.c_proj.weight", {C, C}, true};
        case ATTPROJB: return {h + "attn.c_proj.bias", {C}};
        case LN2W: return {h + "ln_2.weight", {C}};
        case LN2B: return {h + "ln_2.bias", {C}};
        case FCW: return {h + "mlp.c_fc.weight", {C, 4 * C}, true};
        case FCB: return {h + "mlp.c_fc.bias", {4 * C}};
        case FCPROJW: return {h + "mlp.c_proj.weight", {4 * C, C}, true};
        case FCPROJB: return {h + "mlp.c_proj.bias", {C}};
        case LNFW: return {"ln_f.weight", {C}};
        case LNFB: return {"ln_f.bias", {C}};
    }
    fail("hf_tensor_name: unknown tensor %d", t);
}

// (rows, cols) -> (cols, rows)
inline void transpose_into(const float* src, size_t rows, size_t cols, float* dst) {
    for (size_t r = 0; r < rows; ++r)
        for (size_t k = 0; k < cols; ++k) dst[k * rows + r] = src[r * cols + k];
}

// config.json -> our shape. Settings under which HF's GPT-2 would compute
// something else than our model are refused.
inline GPT2Config read_hf_config(const std::string& dir) {
    const std::string path = dir + "/config.json";
    JsonValue root = parse_json_file(path);
    CHECK(root.is_object(), "%s: expected a JSON object", path.c_str());
    auto integer = [&](std::initializer_list<const char*> keys) {
        for (const char* k : keys)
            if (const JsonValue* v = root.find(k)) {
                CHECK(v->is_integer_in(1, 1 << 30), "%s: %s must be a positive integer", v->where().c_str(), k);
                return (int)v->as_integer();
            }
        fail("%s: no \"%s\"", path.c_str(), *keys.begin());
    };
    GPT2Config c{.max_seq_len = integer({"n_positions", "n_ctx"}), .vocab_size = integer({"vocab_size"}),
                 .num_layers = integer({"n_layer"}), .num_heads = integer({"n_head"}), .channels = integer({"n_embd"})};
    c.padded_vocab_size = padded_vocab(c.vocab_size);
    auto refuse_unless = [&](const char* key, const std::function<bool(const JsonValue&)>& ok, const char* want) {
        if (const JsonValue* v = root.find(key))
            CHECK(ok(*v), "%s: %s must be %s for this trainer's GPT-2", v->where().c_str(), key, want);
    };
    refuse_unless("model_type", [](const JsonValue& v) { return v.is_string() && v.as_string() == "gpt2"; }, "\"gpt2\"");
    refuse_unless("activation_function", [](const JsonValue& v) {
        return v.is_string() && (v.as_string() == "gelu_new" || v.as_string() == "gelu_pytorch_tanh");
    }, "\"gelu_new\" (GELU, tanh approximation)");
    refuse_unless("layer_norm_epsilon", [](const JsonValue& v) { return v.is_number() && v.as_number() == 1e-5; },
                  "1e-05");
    refuse_unless("n_inner", [&](const JsonValue& v) {
        return v.is_null() || (v.is_integer_in(1, 1 << 30) && v.as_integer() == 4LL * c.channels);
    }, "null (4 * n_embd)");
    refuse_unless("tie_word_embeddings", [](const JsonValue& v) { return v.is_bool() && v.as_bool(); }, "true");
    refuse_unless("scale_attn_weights", [](const JsonValue& v) { return v.is_bool() && v.as_bool(); }, "true");
    for (const char* key : {"scale_attn_by_inverse_layer_idx", "reorder_and_upcast_attn", "add_cross_attention"})
        refuse_unless(key, [](const JsonValue& v) { return v.is_bool() && !v.as_bool(); }, "false");
    validate_config(c, path);
    return c;
}

inline std::string hf_config_json(const GPT2Config& c) {
    return strf("{\n"
                "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
                "  \"model_type\": \"gpt2\",\n"
                "  \"vocab_size\": %d,\n"
                "  \"n_positions\": %d,\n"
                "  \"n_ctx\": %d,\n"
                "  \"n_embd\": %d,\n"
                "  \"n_layer\": %d,\n"
                "  \"n_head\": %d,\n"
                "  \"n_inner\": null,\n"
                "  \"activation_function\": \"gelu_new\",\n"
                "  \"layer_norm_epsilon\": 1e-05,\n"
                "  \"initializer_range\": 0.02,\n"
                "  \"resid_pdrop\": 0.0,\n"
                "  \"embd_pdrop\": 0.0,\n"
                "  \"attn_pdrop\": 0.0,\n"
                "  \"scale_attn_weights\": true,\n"
                "  \"tie_word_embeddings\": true,\n"
                "  \"bos_token_id\": 50256,\n"
                "  \"eos_token_id\": 50256,\n"
                "  \"torch_dtype\": \"float32\"\n"
                "}\n",
                c.vocab_size, c.max_seq_len, c.max_seq_len, c.channels, c.num_layers, c.num_heads);
}

// A Hugging Face GPT-2 folder, opened and checked; read_unit fills our units.
struct HfGpt2Reader {
    GPT2Config cfg;
    SafetensorsReader st;
    std::string prefix;  // "transformer." or ""

    explicit HfGpt2Reader(const std::string& dir) : cfg(read_hf_config(dir)), st(dir + "/model.safetensors") {
        prefix = st.find("transformer.wte.weight") ? "transformer." : "";
        // every tensor present with the right dtype and shape before anything is read
        ParamLayout layout(cfg);
        for (int u = 0; u < layout.num_units(); ++u)
            for (const TensorSpec& t : layout.unit_spec(u).tensors) check_tensor(hf_tensor_name(cfg, t.id, t.layer));
        if (st.find("lm_head.weight")) {
            HfTensorName wte = hf_tensor_name(cfg, WTE, 0);
            CHECK(st.read_f32("lm_head.weight", wte.shape) == st.read_f32(prefix + wte.name, wte.shape),
                  "%s: lm_head.weight differs from %swte.weight: an untied LM head is not supported",
                  st.path().c_str(), prefix.c_str());
        }
    }

    // Unit u's parameters as fp32, at their offsets inside the unit (padding untouched).
    void read_unit(const ParamLayout& layout, int u, float* dst) const {
        for (const TensorSpec& t : layout.unit_spec(u).tensors) {
            HfTensorName hf = hf_tensor_name(cfg, t.id, t.layer);
            std::vector<float> v = st.read_f32(prefix + hf.name, hf.shape);
            float* out = dst + t.offset_in_unit;
            if (hf.transposed) {
                transpose_into(v.data(), (size_t)hf.shape[0], (size_t)hf.shape[1], out);
            } else {
                std::copy(v.begin(), v.end(), out);
                std::fill(out + v.size(), out + t.numel, 0.0f);  // wte's padded rows
            }
        }
    }

  private:
    void check_tensor(const HfTensorName& hf) const {
        const SafetensorsTensor& t = st.float_tensor(prefix + hf.name);
        CHECK(t.shape == hf.shape, "%s: tensor \"%s\" has the wrong shape for the model of config.json (%s)",
              st.path().c_str(), t.name.c_str(), describe_config(cfg).c_str());
    }
};

// Writes DIR/config.json and DIR/model.safetensors (fp32) for a model whose
// units `unit(u)` returns (fp32, indexed by offset inside the unit).
inline void write_hf_gpt2(const std::string& dir, const ParamLayout& layout,
                          const std::function<const float*(int u)>& unit) {
    make_dir(dir);
    SafetensorsWriter w;
    w.add_metadata("format", "pt");  // what transformers expects of a PyTorch checkpoint
    for (int u = 0; u < layout.num_units(); ++u) {
        const float* base = unit(u);
        for (const TensorSpec& t : layout.unit_spec(u).tensors) {
            HfTensorName hf = hf_tensor_name(layout.cfg, t.id, t.layer);
            const float* src = base + t.offset_in_unit;
            const size_t n = shape_numel(hf.shape);
            std::vector<float> v(n);
            if (hf.transposed) transpose_into(src, (size_t)hf.shape[1], (size_t)hf.shape[0], v.data());
            else std::copy(src, src + n, v.begin());  // wte: the first V rows
            w.add_f32("transformer." + hf.name, hf.shape, std::move(v));
        }
    }
    w.write(dir + "/model.safetensors");
    write_file_atomically(dir + "/config.json", hf_config_json(layout.cfg));
}
