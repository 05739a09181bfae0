// The memory predictor against the accountant, for tests that run the engine
// in-process and read a rank's bytes at the step's four moments.
#pragma once

#include <cmath>
#include <string>

#include "test/test_util.h"
#include "zero/base/memory.h"
#include "zero/engine/memory_predictor.h"

// After forward, after backward and after the step, every arena must match to
// the byte. Reserved is held within 2%, as test_zero_memory holds it: the
// predictor sizes the norm's partial sums by rank 0's piece count, which other
// ranks' may differ from. `who` names the run and rank in a failure.
inline void expect_memory_as_predicted(const MemCounts& reserved, const MemCounts& after_forward,
                                       const MemCounts& after_backward, const MemCounts& after_step,
                                       const MemoryPrediction& pred, const std::string& who) {
    const MemCounts* got[4] = {&reserved, &after_forward, &after_backward, &after_step};
    const MemCounts* want[4] = {&pred.reserved, &pred.after_forward, &pred.after_backward, &pred.after_step};
    const char* phase[4] = {"reserved", "after forward", "after backward", "after step"};
    for (int ph = 0; ph < 4; ph++)
        for (Arena a : {Arena::Device, Arena::Host}) {
            double g = (double)got[ph]->total(a), w = (double)want[ph]->total(a);
            EXPECT(ph == 0 ? std::fabs(g - w) <= 0.02 * w : g == w, "%s %s %s: accountant %.0f bytes, predictor %.0f",
                   who.c_str(), phase[ph], arena_name(a), g, w);
        }
}
