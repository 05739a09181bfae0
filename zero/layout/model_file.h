// llm.c model files: a header of 256 int32 followed by every parameter in
// tensor-major order (see zero/layout/param_layout.h), fp32 (version 3) or bf16
// (version 5). Our buffer is unit-major, so reading and writing is a
// permutation: each (tensor, layer) is one contiguous run in both orders.
#pragma once

#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/base/dtype.h"
#include "zero/layout/param_layout.h"

constexpr int MODEL_MAGIC = 20240326;
constexpr int MODEL_VERSION_FP32 = 3;
constexpr int MODEL_VERSION_BF16 = 5;
constexpr size_t MODEL_HEADER_BYTES = 256 * sizeof(int);

// Reads a model file's header; fails with one line if it is not a usable model file.
struct ModelFile {
    std::string path;
    GPT2Config cfg;
    int version = 0;
    size_t elem_size = 4;

    explicit ModelFile(const std::string& p) : path(p) {
        FILE* f = open_file(path, "rb");
        int header[256];
        size_t got = fread(header, 1, sizeof(header), f);
        size_t size = file_size(f);
        fclose(f);
        CHECK(got == sizeof(header), "%s is truncated: no complete model header", path.c_str());
        CHECK(header[0] == MODEL_MAGIC, "%s is not an llm.c model file (magic %d, expected %d)", path.c_str(),
              header[0], MODEL_MAGIC);
        version = header[1];
        CHECK(version == MODEL_VERSION_FP32 || version == MODEL_VERSION_BF16,
              "%s: unsupported model file version %d (3 = fp32, 5 = bf16)", path.c_str(), version);
        elem_size = version == MODEL_VERSION_FP32 ? 4 : 2;
        // header[2..7] = maxT, V, L, NH, C, Vp
        cfg = {.max_seq_len = header[2], .vocab_size = header[3], .padded_vocab_size = header[7],
               .num_layers = header[4], .num_heads = header[5], .channels = header[6]};
        validate_config(cfg, path);
        size_t expect = MODEL_HEADER_BYTES + ParamLayout(cfg).file_numel() * elem_size;
        CHECK(size == expect, "%s is truncated or padded: %zu bytes, expected %zu for %s", path.c_str(), size, expect,
              describe_config(cfg).c_str());
    }

    // Unit u's parameters as fp32, at their offsets inside the unit.
    void read_unit(const ParamLayout& layout, int u, float* dst) const {
        FILE* f = open_file(path, "rb");
        std::vector<char> raw;
        for (const TensorSpec& t : layout.unit_spec(u).tensors) {
            raw.resize(t.numel * elem_size);
            seek_to(f, MODEL_HEADER_BYTES + layout.file_offset(t.id, t.layer) * elem_size, path);
            read_exact(f, raw.data(), raw.size(), path);
            float* out = dst + t.offset_in_unit;
            if (elem_size == 4) memcpy(out, raw.data(), raw.size());
            else
                for (size_t i = 0; i < t.numel; i++) out[i] = to_float(((const bf16*)raw.data())[i]);
        }
        fclose(f);
    }
};

inline bool same_shape(const GPT2Config& a, const GPT2Config& b) {
    return a.max_seq_len == b.max_seq_len && a.vocab_size == b.vocab_size && a.padded_vocab_size == b.padded_vocab_size &&
           a.num_layers == b.num_layers && a.num_heads == b.num_heads && a.channels == b.channels;
}

// Writes a model file atomically, one unit at a time, in any order of units.
// E is the element type on disk: float (version 3) or bf16 (version 5).
template <typename E>
class ModelFileWriter {
    static_assert(sizeof(E) == 4 || sizeof(E) == 2, "fp32 or bf16 elements");

  public:
    ModelFileWriter(const std::string& path, const ParamLayout& layout_) : layout(layout_), out(path) {
        const GPT2Config& c = layout.cfg;
        const int header[256] = {MODEL_MAGIC, sizeof(E) == 4 ? MODEL_VERSION_FP32 : MODEL_VERSION_BF16,
                                 c.max_seq_len, c.vocab_size, c.num_layers, c.num_heads, c.channels,
                                 c.padded_vocab_size};  // the rest zero
        out.write(header, sizeof(header));
    }
    // values: unit u's parameters (host), indexed by offset inside the unit
    void write_unit(int u, const E* values) {
        for (const TensorSpec& t : layout.unit_spec(u).tensors)
            out.write_at(MODEL_HEADER_BYTES + layout.file_offset(t.id, t.layer) * sizeof(E), values + t.offset_in_unit,
                         t.numel * sizeof(E));
    }
    void commit() { out.commit(); }

  private:
    const ParamLayout& layout;
    AtomicFile out;
};
