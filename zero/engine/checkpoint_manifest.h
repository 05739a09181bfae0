// A checkpoint's MANIFEST: which run wrote it, and every file it holds with its
// size and checksum (zero/base/hash64.h). Resume verifies a checkpoint against
// it before loading a byte, and falls back to an older checkpoint if it does not
// match. It is plain text, written last, one fact per line:
//
//     train_gpt2_zero checkpoint 1
//     step 10
//     model L=2 H=4 C=64 V=512 Vp=512 T=64
//     seed 1337
//     world 4
//     tp 2
//     pipeline 2,1        (only with pipeline stages: layers per stage)
//     stage 2
//     precision fp32
//     tokens_per_step 256
//     file model.bin 270336 9f1c04d2a6b35e71
//     file state.bin 112 03e5a1c2d4b6f789
//     file optim_rank00000.bin 406588 77aa0c3d95e1b2f4
//     file optim_rank00001.bin 406588 1b2c3d4e5f607182
//     ...
//     end
//
// world is every rank of the grid (one optimizer file each), tp its
// tensor-parallel degree t, pipeline its stages' layer counts (world = d x t x
// the number of stages); stage is the ZeRO stage.
//
// Parsing never fails the process: a manifest is untrusted bytes (a torn or
// foreign file), and a bad one only means "fall back to an older checkpoint".
#pragma once

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "zero/base/hash64.h"
#include "zero/layout/gpt2_config.h"
#include "zero/layout/pipeline_plan.h"

constexpr const char* MANIFEST_NAME = "MANIFEST";
constexpr const char* MANIFEST_FIRST_LINE = "train_gpt2_zero checkpoint 1";
constexpr size_t MANIFEST_MAX_BYTES = 1 << 20;

struct ManifestFile {
    std::string name;  // inside the checkpoint directory, no '/'
    uint64_t size = 0, hash = 0;
};

// What a checkpoint is of: the run that wrote it.
struct CheckpointIdentity {
    int step = 0;
    GPT2Config shape;
    unsigned long long seed = 0;
    int world = 0, tp = 1, stage = 0;
    std::vector<int> pp_layers;  // layers per pipeline stage; empty: one stage
    std::string precision;
    long long tokens_per_step = 0;
    int pp() const { return pp_layers.empty() ? 1 : (int)pp_layers.size(); }
};

struct CheckpointManifest {
    CheckpointIdentity id;
    std::vector<ManifestFile> files;

    const ManifestFile* find(const std::string& name) const {
        for (const ManifestFile& f : files)
            if (f.name == name) return &f;
        return nullptr;
    }

    std::string to_text() const {
        std::string s = std::string(MANIFEST_FIRST_LINE) + "\n";
        const GPT2Config& c = id.shape;
        s += strf("step %d\nmodel L=%d H=%d C=%d V=%d Vp=%d T=%d\nseed %llu\nworld %d\ntp %d\nstage %d\nprecision %s\n"
                  "tokens_per_step %lld\n",
                  id.step, c.num_layers, c.num_heads, c.channels, c.vocab_size, c.padded_vocab_size, c.max_seq_len,
                  id.seed, id.world, id.tp, id.stage, id.precision.c_str(), id.tokens_per_step);
        if (id.pp_layers.size() > 1) s += "pipeline " + PipelinePlan{id.pp_layers}.text() + "\n";
        for (const ManifestFile& f : files)
            s += strf("file %s %" PRIu64 " %016" PRIx64 "\n", f.name.c_str(), f.size, f.hash);
        return s + "end\n";
    }
};

// A file name a manifest may list: letters, digits, '_', '.', '-', not
// starting with '.', so it can never leave its directory.
inline bool manifest_name_ok(const std::string& n) {
    if (n.empty() || n.size() > 128 || n[0] == '.') return false;
    for (char ch : n)
        if (!(isalnum((unsigned char)ch) || ch == '_' || ch == '.' || ch == '-')) return false;
    return true;
}

namespace manifest_detail {
// The words of one line, split at single spaces; false on any other whitespace
// or control byte, or an empty word (a manifest we wrote has none).
inline bool split_words(const std::string& line, std::vector<std::string>& words) {
    words.assign(1, "");
    for (char ch : line) {
        if ((unsigned char)ch < 0x20 || (unsigned char)ch > 0x7e) return false;
        if (ch == ' ') words.emplace_back();
        else words.back() += ch;
    }
    return std::none_of(words.begin(), words.end(), [](const std::string& w) { return w.empty(); });
}
inline bool parse_u64(const std::string& w, int base, uint64_t& out) {
    if (w.empty() || w.size() > (base == 16 ? 16u : 20u)) return false;
    for (char ch : w)
        if (!(base == 16 ? isxdigit((unsigned char)ch) : isdigit((unsigned char)ch))) return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long v = strtoull(w.c_str(), &end, base);
    if (errno != 0 || *end != '\0') return false;
    out = v;
    return true;
}
// A decimal integer in [lo, hi], the whole word.
inline bool parse_int(const std::string& w, long long lo, long long hi, long long& out) {
    const bool neg = !w.empty() && w[0] == '-';
    uint64_t u = 0;
    if (w.size() > 20 || !parse_u64(w.substr(neg), 10, u) || u > (uint64_t)LLONG_MAX) return false;
    const long long v = neg ? -(long long)u : (long long)u;
    if (v < lo || v > hi) return false;
    out = v;
    return true;
}
// "X=<int>" with X the expected key
inline bool parse_keyed(const std::string& w, const char* key, int& out) {
    std::string k = std::string(key) + "=";
    long long v;
    if (w.compare(0, k.size(), k) != 0 || !parse_int(w.substr(k.size()), 1, 1 << 30, v)) return false;
    out = (int)v;
    return true;
}
}  // namespace manifest_detail

// Parses a manifest's text; false with `why` (one line) if it is not a complete
// manifest of ours.
inline bool parse_manifest(const std::string& text, CheckpointManifest& m, std::string& why) {
    using namespace manifest_detail;
    m = CheckpointManifest{};
    if (text.size() > MANIFEST_MAX_BYTES) return why = "the manifest is too large", false;
    std::vector<std::string> lines = split_at(text, '\n');
    if (!lines.back().empty()) return why = "the manifest is cut short (no final newline)", false;
    lines.pop_back();  // (the empty piece after the final newline)
    if (lines.empty() || lines[0] != MANIFEST_FIRST_LINE) return why = "not a checkpoint manifest of ours", false;
    if (lines.back() != "end") return why = "the manifest is cut short (no 'end' line)", false;
    bool seen[8] = {};  // the identity's facts, each once
    std::vector<std::string> w;
    for (size_t i = 1; i + 1 < lines.size(); i++) {
        const std::string at = "manifest line " + std::to_string(i + 1) + " is malformed";
        if (!split_words(lines[i], w)) return why = at, false;
        const std::string& key = w[0];
        long long v = 0;
        bool ok = false;
        int slot = -1;
        if (key == "step" && w.size() == 2) {
            slot = 0, ok = parse_int(w[1], 0, 2147483647, v), m.id.step = (int)v;
        } else if (key == "model" && w.size() == 7) {
            slot = 1;
            GPT2Config& c = m.id.shape;
            ok = parse_keyed(w[1], "L", c.num_layers) && parse_keyed(w[2], "H", c.num_heads) &&
                 parse_keyed(w[3], "C", c.channels) && parse_keyed(w[4], "V", c.vocab_size) &&
                 parse_keyed(w[5], "Vp", c.padded_vocab_size) && parse_keyed(w[6], "T", c.max_seq_len);
        } else if (key == "seed" && w.size() == 2) {
            uint64_t s = 0;
            slot = 2, ok = parse_u64(w[1], 10, s), m.id.seed = s;
        } else if (key == "world" && w.size() == 2) {
            slot = 3, ok = parse_int(w[1], 1, 1 << 20, v), m.id.world = (int)v;
        } else if (key == "stage" && w.size() == 2) {
            slot = 4, ok = parse_int(w[1], 0, 3, v), m.id.stage = (int)v;
        } else if (key == "precision" && w.size() == 2) {
            slot = 5, ok = w[1] == "fp32" || w[1] == "bf16" || w[1] == "fp16", m.id.precision = w[1];
        } else if (key == "tokens_per_step" && w.size() == 2) {
            slot = 6, ok = parse_int(w[1], 1, (long long)9e18, v), m.id.tokens_per_step = v;
        } else if (key == "tp" && w.size() == 2) {
            slot = 7, ok = parse_int(w[1], 1, 1 << 20, v), m.id.tp = (int)v;
        } else if (key == "pipeline" && w.size() == 2 && m.id.pp_layers.empty()) {
            size_t pos = 0;  // two or more layer counts, each >= 1
            ok = true;
            while (ok && pos <= w[1].size() && m.id.pp_layers.size() < 100000) {
                size_t comma = w[1].find(',', pos);
                ok = parse_int(w[1].substr(pos, comma == std::string::npos ? std::string::npos : comma - pos), 1,
                               1 << 30, v);
                m.id.pp_layers.push_back((int)v);
                if (comma == std::string::npos) break;
                pos = comma + 1;
            }
            ok = ok && m.id.pp_layers.size() > 1;
        } else if (key == "file" && w.size() == 4) {
            ManifestFile f{.name = w[1]};
            ok = manifest_name_ok(f.name) && parse_u64(w[2], 10, f.size) && w[3].size() == 16 &&
                 parse_u64(w[3], 16, f.hash) && !m.find(f.name);
            if (ok) m.files.push_back(f);
            if (m.files.size() > 100000) return why = "the manifest lists too many files", false;
        }
        if (!ok || (slot >= 0 && std::exchange(seen[slot], true))) return why = at, false;  // or a fact given twice
    }
    for (int s = 0; s < 8; s++)
        if (!seen[s]) return why = "the manifest lacks the run's identity", false;
    if (m.id.world % m.id.tp != 0) return why = "the manifest's world is not a grid of its tp", false;
    if (m.id.world % (m.id.tp * m.id.pp()) != 0) return why = "the manifest's world is not a grid of its pipeline", false;
    long long layers = 0;
    for (int c : m.id.pp_layers) layers += c;
    if (m.id.pp() > 1 && layers != m.id.shape.num_layers)
        return why = "the manifest's pipeline stages do not hold its model's layers", false;
    return true;
}
