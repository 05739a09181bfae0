// Speed changes written but not yet measured on a GPU, each behind a switch
// that is off unless named: ZERO_VARIANTS=name,name,... in the environment
// (read once; an unknown name is a one-line error). The trainer prints the
// ones on beside its run header; dev/bench_speed.sh times each alone and all
// together against the default. Once measured, a variant either becomes the
// only path (its old code deleted) or goes.
//
//   fused_optimizer      the global norm's sums of squares over every piece of the rank in two launches
//                        (a table of pieces on the device) and AdamW over every piece in one, instead
//                        of two launches and one AdamW per piece; the same bits (zero_engine.h)
//   residual_ln          a block's last residual add fused into the next block's ln1 (and the final
//                        layernorm): residual3 written once and not read back; the same bits (gpt2.h)
//   device_loss          the step's loss summed on the device and read back as 8 bytes instead of
//                        B*T floats summed on the host; a fixed tree of doubles, so the printed loss
//                        may differ from the host's sum in its last bits (kernels/cpu/reduce.h)
//   encoder_split        the encoder backward cuts a token's run of positions longer than
//                        ENCODER_SPLIT_RUN into pieces summed apart, then added in order; other bits
//                        than the default, the same ones on every run (kernels/cpu/encoder.h)
//   fast_exp_classifier  the classifier's exponentials with __expf (GPU only; within the workbench's
//                        tolerances of the CPU twin)
//   dbias_blocks         more row chunks for the matmul's bias gradient, so that a 768-wide bias fills
//                        the GPU (GPU only; another fixed summation order)
#pragma once

#include <cstdlib>
#include <string>

#include "zero/base/common.h"

enum class Variant : unsigned {
    FusedOptimizer,
    ResidualLn,
    DeviceLoss,
    EncoderSplit,
    FastExpClassifier,
    DbiasBlocks,
    Count
};

inline const char* variant_name(Variant v) {
    static const char* const names[] = {"fused_optimizer", "residual_ln",         "device_loss",
                                        "encoder_split",   "fast_exp_classifier", "dbias_blocks"};
    return names[(unsigned)v];
}

// The set named by `text` (a comma list; blanks and empty items ignored), as
// bits; an unknown name is put in `bad` and 0 returned.
inline unsigned parse_variants(const std::string& text, std::string& bad) {
    unsigned bits = 0;
    for (std::string name : split_at(text, ',')) {
        name.erase(0, name.find_first_not_of(" \t"));
        name.erase(name.find_last_not_of(" \t") + 1);
        if (name.empty()) continue;
        unsigned v = 0;
        while (v < (unsigned)Variant::Count && name != variant_name((Variant)v)) v++;
        if (v == (unsigned)Variant::Count) {
            bad = name;
            return 0;
        }
        bits |= 1u << v;
    }
    return bits;
}

// The variants named in ZERO_VARIANTS, read on first use.
inline unsigned variant_bits() {
    static const unsigned bits = [] {
        const char* env = getenv("ZERO_VARIANTS");
        std::string bad;
        unsigned b = parse_variants(env ? env : "", bad);
        if (!bad.empty()) {
            std::string known;
            for (unsigned v = 0; v < (unsigned)Variant::Count; v++)
                known += std::string(v ? ", " : "") + variant_name((Variant)v);
            fail("ZERO_VARIANTS: unknown variant '%s' (known: %s)", bad.c_str(), known.c_str());
        }
        return b;
    }();
    return bits;
}
inline bool variant_on(Variant v) { return variant_bits() >> (unsigned)v & 1u; }

// "residual_ln,device_loss": the ones on, in the list's order ("" when none)
inline std::string variants_text() {
    std::string s;
    for (unsigned v = 0; v < (unsigned)Variant::Count; v++)
        if (variant_on((Variant)v)) s += std::string(s.empty() ? "" : ",") + variant_name((Variant)v);
    return s;
}
