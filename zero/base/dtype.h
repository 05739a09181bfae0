// Compute dtypes: fp32, bf16 and fp16, with conversions usable on the host and,
// in the CUDA build, on the device.
//
// bf16 and f16 are our own 2-byte structs so that one set of types serves both
// builds: the CPU build stores parameters, gradients and activations in them
// exactly as the GPU does (so per-rank memory is the same), and the CUDA kernels
// reinterpret them as __nv_bfloat16 / __half where they need the hardware types.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define HD __host__ __device__ __forceinline__
#else
#define HD inline
#endif

enum class DType : int { F32 = 0, BF16 = 1, F16 = 2 };

struct bf16 {
    uint16_t bits;
};
struct f16 {
    uint16_t bits;
};
static_assert(sizeof(bf16) == 2 && sizeof(f16) == 2, "16-bit types must be 2 bytes");

inline size_t dtype_size(DType d) { return d == DType::F32 ? 4 : 2; }
inline const char* dtype_name(DType d) { return d == DType::F32 ? "fp32" : d == DType::BF16 ? "bf16" : "fp16"; }

template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::F32; };
template <> struct dtype_of<bf16> { static constexpr DType value = DType::BF16; };
template <> struct dtype_of<f16> { static constexpr DType value = DType::F16; };

HD uint32_t float_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}
HD float bits_float(uint32_t u) {
    float x;
    memcpy(&x, &u, 4);
    return x;
}

// ---------------------------------------------------------------------------
// bf16: the top 16 bits of an fp32. Widening is exact; narrowing rounds to
// nearest even (NaN stays NaN).

HD float to_float(float x) { return x; }
HD float to_float(bf16 x) { return bits_float((uint32_t)x.bits << 16); }

HD bf16 bf16_from_float(float x) {
    uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{(uint16_t)((u >> 16) | 0x40)};  // quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);
    return bf16{(uint16_t)(u >> 16)};
}

// Stochastic rounding: adding 16 random bits below the cut rounds up with
// probability equal to the discarded fraction, so the rounding is unbiased.
HD bf16 bf16_from_float_stochastic(float x, uint32_t random) {
    uint32_t u = float_bits(x);
    if ((u & 0x7fffffffu) >= 0x7f800000u) return bf16_from_float(x);  // inf and NaN round normally
    uint32_t r = u + (random & 0xffffu);
    if ((r & 0x7f800000u) == 0x7f800000u) r = u;  // would carry into inf: truncate instead
    return bf16{(uint16_t)(r >> 16)};
}

// ---------------------------------------------------------------------------
// fp16 (IEEE binary16). On the device the hardware conversion is used; on the
// host a bit-exact software version (round to nearest even, subnormals, inf).

HD float half_bits_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf / NaN
    if (exp == 0) {
        if (man == 0) return bits_float(sign);
        // subnormal: value = man * 2^-24, exact in fp32
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return bits_float(sign | ((exp + 112u) << 23) | (man << 13));
}

HD uint16_t float_to_half_bits(float x) {
    uint32_t u = float_bits(x);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return sign | 0x7e00u;       // NaN
    if (a >= 0x477ff000u) return sign | 0x7c00u;      // rounds to >= 65520: inf
    if (a < 0x38800000u) {                            // below the smallest normal half (2^-14)
        if (a < 0x33000000u) return sign;             // below half of the smallest subnormal (2^-25): zero
        // subnormal: shift the 24-bit mantissa so that the unit is 2^-24, round to nearest even
        uint32_t e = a >> 23;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;                    // value = m * 2^(e-150); unit 2^-24
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t halfway = 1u << (shift - 1u);
        if (rem > halfway || (rem == halfway && (q & 1u))) q++;
        return sign | (uint16_t)q;
    }
    // normal: rebias the exponent, round the mantissa to 10 bits, nearest even
    uint32_t r = a - 0x38000000u;                     // exponent 127 -> 15
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

HD float to_float(f16 x) {
#if defined(__CUDA_ARCH__)
    __half_raw raw;
    raw.x = x.bits;
    return __half2float(__half(raw));
#else
    return half_bits_to_float(x.bits);
#endif
}

HD f16 f16_from_float(float x) {
#if defined(__CUDA_ARCH__)
    __half h = __float2half_rn(x);
    return f16{__half_raw(h).x};
#else
    return f16{float_to_half_bits(x)};
#endif
}

// from_float<T>(x): narrowing with round to nearest even, for any compute dtype.
template <typename T> HD T from_float(float x);
template <> HD float from_float<float>(float x) { return x; }
template <> HD bf16 from_float<bf16>(float x) {
#if defined(__CUDA_ARCH__)
    __nv_bfloat16 h = __float2bfloat16_rn(x);
    return bf16{__nv_bfloat16_raw(h).x};
#else
    return bf16_from_float(x);
#endif
}
template <> HD f16 from_float<f16>(float x) { return f16_from_float(x); }
