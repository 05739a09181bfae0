// Counter-based random numbers: every value is a pure function of (seed,
// counter), so any element can be generated on its own, on any rank, on the host
// or the device, and always gets the same value. That is what makes the
// initialisation identical whatever the world size and stage, and the
// stochastic rounding of bf16 parameters identical on every rank layout.
#pragma once

#include <cmath>
#include <cstdint>

#include "zero/base/dtype.h"  // HD

// SplitMix64's finaliser: a bijective mix with good avalanche.
HD uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

HD uint32_t random_u32(uint64_t seed, uint64_t counter) { return (uint32_t)(mix64(seed ^ mix64(counter)) >> 32); }

// A 32-bit mix (Wellons' "lowbias32" constants): cheap in SIMD lanes, which
// have 32-bit multiplies but not 64-bit ones.
HD uint32_t mix32(uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

// The random bits of stochastic rounding for element `index` of the flat
// buffer: 32-bit arithmetic only, so the CPU AdamW's vector lanes, the GPU and
// the scalar reference all compute the same bits.
HD uint32_t rounding_bits(uint64_t seed, uint64_t index) {
    uint32_t key = mix32((uint32_t)(index >> 32) ^ (uint32_t)seed) ^ (uint32_t)(seed >> 32);
    return mix32((uint32_t)index ^ key);
}

// uniform in (0, 1]: 24 random bits, never 0 (safe for log)
HD float random_uniform(uint64_t seed, uint64_t counter) {
    return ((random_u32(seed, counter) >> 8) + 1) * (1.0f / 16777216.0f);
}

// standard normal by Box-Muller from two independent uniforms
HD float random_normal(uint64_t seed, uint64_t counter) {
    float u1 = random_uniform(seed, 2 * counter);
    float u2 = random_uniform(seed, 2 * counter + 1);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.283185307179586f * u2);
}

// A small sequential generator for host-side sampling decisions.
struct Rng {
    uint64_t state;
    explicit Rng(uint64_t seed) : state(seed) {}
    uint32_t next_u32() { return (uint32_t)(mix64(state++) >> 32); }
    float next_float() { return (next_u32() >> 8) * (1.0f / 16777216.0f); }  // [0, 1)
};
