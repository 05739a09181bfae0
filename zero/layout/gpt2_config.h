// GPT-2 model shapes: llm.c's depth descriptors (d12, d24, d36, d48) or any
// explicit shape, so that tests can use tiny models.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "zero/base/common.h"

struct GPT2Config {
    int max_seq_len = 1024;         // maxT: rows of the positional embedding
    int vocab_size = 50257;         // V
    int padded_vocab_size = 50304;  // Vp: V rounded up so the LM head matmul has friendly shapes
    int num_layers = 12;            // L
    int num_heads = 12;             // NH
    int channels = 768;             // C
};

// Vocabulary padded to a multiple of 128 (50257 -> 50304). The padded rows of
// wte are zero and their logits are ignored by the loss.
inline int padded_vocab(int V) { return (int)round_up((size_t)V, 128); }

inline void validate_config(const GPT2Config& c, const std::string& what) {
    CHECK(c.num_layers >= 1 && c.num_heads >= 1 && c.channels >= 1 && c.vocab_size >= 2 && c.max_seq_len >= 1,
          "%s: every dimension must be positive", what.c_str());
    CHECK(c.channels % c.num_heads == 0, "%s: channels (%d) must be a multiple of heads (%d)", what.c_str(),
          c.channels, c.num_heads);
    CHECK(c.channels % 8 == 0, "%s: channels (%d) must be a multiple of 8", what.c_str(), c.channels);
    CHECK(c.padded_vocab_size >= c.vocab_size, "%s: padded vocab smaller than vocab", what.c_str());
}

// "d12" | "d24" | "d36" | "d48" (GPT-2 124M, 350M, 774M, 1558M), or an explicit
// shape "L=2,H=4,C=64,V=512,T=64" (layers, heads, channels, vocab, max seq len;
// unspecified keys keep GPT-2 124M's values).
inline GPT2Config gpt2_config_from_descriptor(const std::string& desc) {
    GPT2Config c;
    if (desc == "d12") {
        c.num_layers = 12, c.num_heads = 12, c.channels = 768;
    } else if (desc == "d24") {
        c.num_layers = 24, c.num_heads = 16, c.channels = 1024;
    } else if (desc == "d36") {
        c.num_layers = 36, c.num_heads = 20, c.channels = 1280;
    } else if (desc == "d48") {
        c.num_layers = 48, c.num_heads = 25, c.channels = 1600;
    } else if (desc.find('=') != std::string::npos) {
        size_t pos = 0;
        while (pos < desc.size()) {
            size_t end = desc.find(',', pos);
            if (end == std::string::npos) end = desc.size();
            std::string item = desc.substr(pos, end - pos);
            size_t eq = item.find('=');
            CHECK(eq != std::string::npos && eq + 1 < item.size(), "model shape '%s': expected KEY=VALUE, got '%s'",
                  desc.c_str(), item.c_str());
            std::string key = item.substr(0, eq);
            char* rest = nullptr;
            long v = strtol(item.c_str() + eq + 1, &rest, 10);
            CHECK(*rest == '\0' && v > 0 && v < (1L << 30), "model shape '%s': bad value in '%s'", desc.c_str(),
                  item.c_str());
            if (key == "L") c.num_layers = (int)v;
            else if (key == "H") c.num_heads = (int)v;
            else if (key == "C") c.channels = (int)v;
            else if (key == "V") c.vocab_size = (int)v;
            else if (key == "T") c.max_seq_len = (int)v;
            else fail("model shape '%s': unknown key '%s' (use L, H, C, V, T)", desc.c_str(), key.c_str());
            pos = end + 1;
        }
    } else {
        fail("unknown model '%s': use d12, d24, d36, d48, a shape like L=2,H=4,C=64,V=512,T=64, or a model file",
             desc.c_str());
    }
    c.padded_vocab_size = padded_vocab(c.vocab_size);
    validate_config(c, "model '" + desc + "'");
    return c;
}

inline std::string describe_config(const GPT2Config& c) {
    return strf("L=%d,H=%d,C=%d,V=%d,T=%d", c.num_layers, c.num_heads, c.channels, c.vocab_size, c.max_seq_len);
}
