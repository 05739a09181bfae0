// Loss scaling for fp16, with DeepSpeed's semantics and option names:
//   loss_scale > 0           a static scale;
//   otherwise dynamic:       start at 2^initial_scale_power; on an overflow,
//                            spend one unit of hysteresis, or once it is down to
//                            1 halve the scale (not below min_loss_scale); after
//                            loss_scale_window steps without overflow since the
//                            last one, double the scale and restore hysteresis.
// An overflowed step is skipped on every rank (the overflow flag is the max
// over ranks), so all ranks update their scalers identically. bf16 and fp32
// need no scaling: their scale is fixed at 1.
#pragma once

#include <algorithm>

// DeepSpeed's fp16 settings, as the run was told (loss_scaler_config() in
// zero/run/run_setup.h; the defaults live in zero/run/options.h only).
struct LossScalerConfig {
    float static_scale = 0;  // > 0: a fixed scale
    int initial_scale_power = 0;
    int window = 0;
    int hysteresis = 0;
    float min_scale = 0;
};

struct LossScaler {
    // the state, as saved in checkpoints
    struct State {
        float scale;
        int iter;               // steps seen (overflowed ones included)
        int last_overflow_iter;
        int hysteresis_left;
    };

    LossScalerConfig cfg;
    bool dynamic = false;
    State st{};

    LossScaler() { st = {1.0f, 0, -1, 1}; }
    LossScaler(const LossScalerConfig& c, bool enabled) : cfg(c) {
        dynamic = enabled && c.static_scale <= 0.0f;
        float initial = !enabled ? 1.0f : c.static_scale > 0.0f ? c.static_scale : (float)(1ull << c.initial_scale_power);
        st = {initial, 0, -1, c.hysteresis};
    }

    float scale() const { return st.scale; }

    void update(bool overflow) {
        if (dynamic) {
            if (overflow) {
                if (cfg.hysteresis == 1 || st.hysteresis_left == 1) st.scale = std::max(st.scale / 2.0f, cfg.min_scale);
                else st.hysteresis_left--;
                st.last_overflow_iter = st.iter;
            } else if ((st.iter - st.last_overflow_iter) % cfg.window == 0) {
                st.hysteresis_left = cfg.hysteresis;
                st.scale *= 2.0f;
            }
        }
        st.iter++;
    }
};
