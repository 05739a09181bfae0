// Fast CPU AdamW for optimizer offload (ZeRO-Offload): the fp32 master
// weights and both moments live in host memory, the gradient arrives there in
// its own dtype, and the compute-dtype copy of the parameter is written in the
// same pass. Same semantics as the scalar reference adamw_cpu<Tg,Tp>
// (kernels/cpu/adamw.h); this version is vectorised, multi-threaded and memory
// bound.
//
//   CpuAdamW opt(8);                    // one per rank: the caller + 7 pooled workers
//   opt.step(master, m, v, grad, param_out, n, step, full_offset);
//
// Code paths, chosen at run time (the header compiles on any x86-64 whatever
// -march is; elsewhere only the scalar path exists):
//   "avx512"  AVX-512F/BW/VL: 16 lanes, masked tail;
//   "avx2"    AVX2 + FMA + F16C: 8 lanes, scalar tail;
//   "scalar"  portable C++.
// force_isa() selects one explicitly (tests, benchmarks).
//
// Exactness. Every path computes, per element, in this order (fp32, each step
// rounded once; fma = one rounding):
//   g    = to_float(grad) * grad_scale
//   m    = fma(beta1, m, (1 - beta1) * g)
//   v    = fma(beta2, v, ((1 - beta2) * g) * g)
//   t    = (m / bias_correction1) / (sqrt(v / bias_correction2) + eps)
//   w    = fma(-lr, fma(weight_decay, w, t), w)
// with correctly rounded division and square root (no reciprocal
// approximations). This is exactly the operation order GCC produces for
// adamw_update() when it may contract a*b+c into FMA (-march=native on any
// FMA machine, GCC's default -ffp-contract=fast: checked for -O2/-O3 and
// znver3, haswell, icelake-server, sapphirerapids), so the fp32 master, m, v
// and the compute-dtype copy are bit-identical to adamw_cpu in those builds.
// The three paths are bit-identical to each other in every build and on every
// machine (the scalar path uses std::fma explicitly). Where adamw_cpu is
// compiled without contraction (no FMA in the target, -ffp-contract=off, other
// compilers) it rounds the four fused products separately and the two can
// differ in the last bits; NaN payloads may differ in any case (outputs are
// NaN in the same places). The compute-dtype copy: bf16 by stochastic rounding
// with rounding_bits(seed, full_offset + i) (lane i of a vector starting at
// element j uses index full_offset + j + i: the 64-bit index is split into
// 32-bit halves exactly as rounding_bits does, including vectors that straddle
// a 2^32 boundary); fp16 by F16C/AVX-512 conversion with round to nearest even
// (IEEE: subnormals, overflow to inf), NaN canonicalised to sign|0x7e00 as
// float_to_half_bits does; fp32 copied.
//
// Threads. The calling thread takes part; num_threads - 1 workers live in a
// pool created once, each pinned to one core. n is cut into contiguous chunks
// (about 4 per participant, none shorter than min_per_thread() elements, edges
// on 64-byte lines of `master`) that the caller and the workers claim with an
// atomic compare-and-swap, so whoever is running does the work: a worker the
// OS has not scheduled yet (oversubscribed machines, emulated ranks) delays the
// call by at most the chunk it already holds. Calls shorter than 2 x min_per_thread() run on the caller alone,
// with no hand-off at all. Workers spin briefly after a call (consecutive calls
// of one optimizer step find them awake), then sleep on a condition variable.
// Workers run the chunks with the caller's MXCSR (rounding, denormal modes).
// Cores: an explicit list (cores[0] is nominally the calling thread's and is
// not re-pinned, cores[1..] are the workers'; used cyclically if short), or by
// default the next num_threads cores of a process-wide cursor over the CPUs
// this process may use (sched_getaffinity), first one hardware thread of each
// physical core, then the SMT siblings: several emulated ranks that each own a
// CpuAdamW in one process therefore get disjoint cores until they run out.
// Results never depend on the thread count, the chunking or the pinning.
//
// Memory: each element is touched once (master, m, v read and written, grad
// read, copy written: 28 B per parameter for bf16/bf16). Calls of at least
// set_streaming_threshold() elements (default 1M) write the copy with
// non-temporal stores, saving the read-for-ownership of a write-only buffer.
// dev/bench_cpu_adamw.cpp measures the throughput against the machine's copy
// bandwidth.
//
// A CpuAdamW is not re-entrant: one step() at a time per object.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define ZERO_CPU_ADAMW_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define ZERO_CPU_ADAMW_X86 0
#endif

#include "kernels/cpu/adamw.h"
#include "zero/base/dtype.h"
#include "zero/base/rng.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wall
// reports as "may be used uninitialized" when they are inlined (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

enum class CpuIsa : int { Auto = -1, Scalar = 0, AVX2 = 1, AVX512 = 2 };

inline const char* cpu_isa_name(CpuIsa isa) {
    switch (isa) {
        case CpuIsa::AVX512: return "avx512";
        case CpuIsa::AVX2: return "avx2";
        case CpuIsa::Scalar: return "scalar";
        default: return "auto";
    }
}

namespace cpu_adamw_detail {

// The per-step scalars, derived once per call exactly as adamw_update derives them.
struct Consts {
    float b1, omb1, b2, omb2, bc1, bc2, eps, wd, nlr, gs;
    uint64_t seed;
};

inline Consts make_consts(const AdamWStep& s) {
    Consts c;
    c.b1 = s.beta1;
    c.omb1 = 1.0f - s.beta1;
    c.b2 = s.beta2;
    c.omb2 = 1.0f - s.beta2;
    c.bc1 = s.bias_correction1;
    c.bc2 = s.bias_correction2;
    c.eps = s.eps;
    c.wd = s.weight_decay;
    c.nlr = -s.lr;
    c.gs = s.grad_scale;
    c.seed = s.rounding_seed;
    return c;
}

// The stochastic-rounding key of the high half of an index (see rounding_bits).
inline uint32_t rounding_key(uint64_t seed, uint32_t hi) { return mix32(hi ^ (uint32_t)seed) ^ (uint32_t)(seed >> 32); }

// Scalar path (also the tails of the AVX2 path). std::fma makes the fused steps
// explicit, so the compiler's contraction choices cannot change them.
template <typename Tg, typename Tp>
inline void range_scalar(float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const Consts& c, uint64_t off) {
    for (size_t i = 0; i < n; i++) {
        const float gi = to_float(g[i]) * c.gs;
        float wi = w[i], mi = m[i], vi = v[i];
        mi = std::fma(c.b1, mi, c.omb1 * gi);
        vi = std::fma(c.b2, vi, (c.omb2 * gi) * gi);
        const float mhat = mi / c.bc1;
        const float vhat = vi / c.bc2;
        const float t = mhat / (std::sqrt(vhat) + c.eps);
        wi = std::fma(c.nlr, std::fma(c.wd, wi, t), wi);
        w[i] = wi;
        m[i] = mi;
        v[i] = vi;
        if (p) p[i] = round_param<Tp>(wi, c.seed, off + i);
    }
}

#if ZERO_CPU_ADAMW_X86

#define ZA_AVX2 __attribute__((target("avx2,fma,f16c")))
#define ZA_AVX2_INL __attribute__((target("avx2,fma,f16c"), always_inline)) inline
#define ZA_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define ZA_AVX512_INL __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c"), always_inline)) inline

// ---------------------------------------------------------------------------
// AVX2 + FMA + F16C: 8 lanes

ZA_AVX2_INL __m256 avx2_load_grad(const float* p) { return _mm256_loadu_ps(p); }
ZA_AVX2_INL __m256 avx2_load_grad(const bf16* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
ZA_AVX2_INL __m256 avx2_load_grad(const f16* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

ZA_AVX2_INL __m256i avx2_mix32(__m256i x) {
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x7feb352du));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 15));
    x = _mm256_mullo_epi32(x, _mm256_set1_epi32((int)0x846ca68bu));
    x = _mm256_xor_si256(x, _mm256_srli_epi32(x, 16));
    return x;
}

// rounding_bits(seed, idx + lane) for 8 lanes; `hi`/`key` cache the key of the
// current high half.
struct Avx2Rng {
    uint64_t seed;
    uint32_t hi;
    __m256i key;
};

ZA_AVX2_INL __m256i avx2_rounding_bits(Avx2Rng& r, uint64_t idx) {
    const uint32_t lo0 = (uint32_t)idx;
    const uint32_t hi = (uint32_t)(idx >> 32);
    __m256i key;
    if (__builtin_expect(lo0 > 0xffffffffu - 7u, 0)) {  // this vector straddles a 2^32 boundary
        alignas(32) uint32_t k[8];
        for (int j = 0; j < 8; j++) k[j] = rounding_key(r.seed, (uint32_t)((idx + (uint64_t)j) >> 32));
        key = _mm256_load_si256(reinterpret_cast<const __m256i*>(k));
    } else {
        if (hi != r.hi) {
            r.hi = hi;
            r.key = _mm256_set1_epi32((int)rounding_key(r.seed, hi));
        }
        key = r.key;
    }
    const __m256i lo = _mm256_add_epi32(_mm256_set1_epi32((int)lo0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    return avx2_mix32(_mm256_xor_si256(lo, key));
}

// bf16_from_float_stochastic on 8 lanes: the 16-bit results in the low halves of the 32-bit lanes
ZA_AVX2_INL __m256i avx2_bf16_stochastic(__m256 x, __m256i rnd) {
    const __m256i u = _mm256_castps_si256(x);
    const __m256i a = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i special = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f7fffff));  // inf or NaN
    const __m256i nan = _mm256_cmpgt_epi32(a, _mm256_set1_epi32(0x7f800000));
    __m256i r = _mm256_add_epi32(u, _mm256_and_si256(rnd, _mm256_set1_epi32(0xffff)));
    const __m256i expo = _mm256_set1_epi32(0x7f800000);
    const __m256i carry_inf = _mm256_cmpeq_epi32(_mm256_and_si256(r, expo), expo);
    r = _mm256_blendv_epi8(r, u, carry_inf);
    r = _mm256_srli_epi32(r, 16);
    // inf: round to nearest even is the truncation; NaN: quiet bit set
    const __m256i sp = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_and_si256(nan, _mm256_set1_epi32(0x40)));
    return _mm256_blendv_epi8(r, sp, special);
}

// 8 lanes of 16-bit values (in 32-bit lanes, each <= 0xffff) -> 8 packed uint16
ZA_AVX2_INL __m128i avx2_pack16(__m256i x) {
    const __m256i p = _mm256_packus_epi32(x, x);  // per 128-bit half: x0..3 x0..3 | x4..7 x4..7
    return _mm256_castsi256_si128(_mm256_permute4x64_epi64(p, 0xd8));
}

// fp16 with round to nearest even; NaN -> sign | 0x7e00 like float_to_half_bits
ZA_AVX2_INL __m128i avx2_to_f16(__m256 x) {
    const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
    const __m256 canon = _mm256_or_ps(_mm256_and_ps(x, _mm256_castsi256_ps(_mm256_set1_epi32((int)0x80000000u))),
                                      _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000)));
    return _mm256_cvtps_ph(_mm256_blendv_ps(x, canon, nan), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

template <bool NT>
ZA_AVX2_INL void avx2_store_param(float* p, __m256 x, Avx2Rng&, uint64_t) {
    if (NT) _mm256_stream_ps(p, x);
    else _mm256_storeu_ps(p, x);
}
template <bool NT>
ZA_AVX2_INL void avx2_store_param(bf16* p, __m256 x, Avx2Rng& r, uint64_t idx) {
    const __m128i h = avx2_pack16(avx2_bf16_stochastic(x, avx2_rounding_bits(r, idx)));
    if (NT) _mm_stream_si128(reinterpret_cast<__m128i*>(p), h);
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}
template <bool NT>
ZA_AVX2_INL void avx2_store_param(f16* p, __m256 x, Avx2Rng&, uint64_t) {
    const __m128i h = avx2_to_f16(x);
    if (NT) _mm_stream_si128(reinterpret_cast<__m128i*>(p), h);
    else _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h);
}

// n elements; NT: the param copy is written with streaming stores (p + 0 must
// be aligned to one vector store).
template <typename Tg, typename Tp, bool HASP, bool NT>
ZA_AVX2 void range_avx2_impl(float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const Consts& c,
                             uint64_t off) {
    const __m256 b1 = _mm256_set1_ps(c.b1), omb1 = _mm256_set1_ps(c.omb1);
    const __m256 b2 = _mm256_set1_ps(c.b2), omb2 = _mm256_set1_ps(c.omb2);
    const __m256 bc1 = _mm256_set1_ps(c.bc1), bc2 = _mm256_set1_ps(c.bc2);
    const __m256 eps = _mm256_set1_ps(c.eps), wd = _mm256_set1_ps(c.wd);
    const __m256 nlr = _mm256_set1_ps(c.nlr), gs = _mm256_set1_ps(c.gs);
    Avx2Rng rng{c.seed, (uint32_t)(off >> 32), _mm256_set1_epi32((int)rounding_key(c.seed, (uint32_t)(off >> 32)))};
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 gv = _mm256_mul_ps(avx2_load_grad(g + i), gs);
        const __m256 mv = _mm256_fmadd_ps(b1, _mm256_loadu_ps(m + i), _mm256_mul_ps(omb1, gv));
        const __m256 vv = _mm256_fmadd_ps(b2, _mm256_loadu_ps(v + i), _mm256_mul_ps(_mm256_mul_ps(omb2, gv), gv));
        const __m256 mhat = _mm256_div_ps(mv, bc1);
        const __m256 vhat = _mm256_div_ps(vv, bc2);
        const __m256 t = _mm256_div_ps(mhat, _mm256_add_ps(_mm256_sqrt_ps(vhat), eps));
        __m256 wv = _mm256_loadu_ps(w + i);
        wv = _mm256_fmadd_ps(nlr, _mm256_fmadd_ps(wd, wv, t), wv);
        _mm256_storeu_ps(m + i, mv);
        _mm256_storeu_ps(v + i, vv);
        _mm256_storeu_ps(w + i, wv);
        if (HASP) avx2_store_param<NT>(p + i, wv, rng, off + i);
    }
    if (NT) _mm_sfence();
    if (i < n) range_scalar(w + i, m + i, v + i, g + i, HASP ? p + i : (Tp*)nullptr, n - i, c, off + i);
}

// ---------------------------------------------------------------------------
// AVX-512 (F, BW, VL): 16 lanes, masked tail

ZA_AVX512_INL __m512 avx512_load_grad(const float* p, __mmask16 k) { return _mm512_maskz_loadu_ps(k, p); }
ZA_AVX512_INL __m512 avx512_load_grad(const bf16* p, __mmask16 k) {
    const __m256i h = _mm256_maskz_loadu_epi16(k, p);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
ZA_AVX512_INL __m512 avx512_load_grad(const f16* p, __mmask16 k) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, p));
}

ZA_AVX512_INL __m512i avx512_mix32(__m512i x) {
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x7feb352du));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 15));
    x = _mm512_mullo_epi32(x, _mm512_set1_epi32((int)0x846ca68bu));
    x = _mm512_xor_si512(x, _mm512_srli_epi32(x, 16));
    return x;
}

struct Avx512Rng {
    uint64_t seed;
    uint32_t hi;
    __m512i key;
};

ZA_AVX512_INL __m512i avx512_rounding_bits(Avx512Rng& r, uint64_t idx) {
    const uint32_t lo0 = (uint32_t)idx;
    const uint32_t hi = (uint32_t)(idx >> 32);
    __m512i key;
    if (__builtin_expect(lo0 > 0xffffffffu - 15u, 0)) {  // straddles a 2^32 boundary
        alignas(64) uint32_t k[16];
        for (int j = 0; j < 16; j++) k[j] = rounding_key(r.seed, (uint32_t)((idx + (uint64_t)j) >> 32));
        key = _mm512_load_si512(k);
    } else {
        if (hi != r.hi) {
            r.hi = hi;
            r.key = _mm512_set1_epi32((int)rounding_key(r.seed, hi));
        }
        key = r.key;
    }
    const __m512i lo = _mm512_add_epi32(_mm512_set1_epi32((int)lo0),
                                        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    return avx512_mix32(_mm512_xor_si512(lo, key));
}

ZA_AVX512_INL __m256i avx512_bf16_stochastic(__m512 x, __m512i rnd) {
    const __m512i u = _mm512_castps_si512(x);
    const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff));
    const __mmask16 special = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f7fffff));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(a, _mm512_set1_epi32(0x7f800000));
    __m512i r = _mm512_add_epi32(u, _mm512_and_si512(rnd, _mm512_set1_epi32(0xffff)));
    const __m512i expo = _mm512_set1_epi32(0x7f800000);
    const __mmask16 carry_inf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(r, expo), expo);
    r = _mm512_mask_blend_epi32(carry_inf, r, u);
    r = _mm512_srli_epi32(r, 16);
    __m512i sp = _mm512_srli_epi32(u, 16);
    sp = _mm512_mask_or_epi32(sp, nan, sp, _mm512_set1_epi32(0x40));
    r = _mm512_mask_blend_epi32(special, r, sp);
    return _mm512_cvtepi32_epi16(r);
}

ZA_AVX512_INL __m256i avx512_to_f16(__m512 x) {
    const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
    const __m512i canon = _mm512_or_si512(_mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32((int)0x80000000u)),
                                          _mm512_set1_epi32(0x7fc00000));
    x = _mm512_mask_blend_ps(nan, x, _mm512_castsi512_ps(canon));
    return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

// FULL: all 16 lanes (NT allowed); else masked by k
template <bool FULL, bool NT>
ZA_AVX512_INL void avx512_store_param(float* p, __m512 x, __mmask16 k, Avx512Rng&, uint64_t) {
    if (!FULL) _mm512_mask_storeu_ps(p, k, x);
    else if (NT) _mm512_stream_ps(p, x);
    else _mm512_storeu_ps(p, x);
}
template <bool FULL, bool NT>
ZA_AVX512_INL void avx512_store16(void* p, __m256i h, __mmask16 k) {
    if (!FULL) _mm256_mask_storeu_epi16(p, k, h);
    else if (NT) _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h);
}
template <bool FULL, bool NT>
ZA_AVX512_INL void avx512_store_param(bf16* p, __m512 x, __mmask16 k, Avx512Rng& r, uint64_t idx) {
    avx512_store16<FULL, NT>(p, avx512_bf16_stochastic(x, avx512_rounding_bits(r, idx)), k);
}
template <bool FULL, bool NT>
ZA_AVX512_INL void avx512_store_param(f16* p, __m512 x, __mmask16 k, Avx512Rng&, uint64_t) {
    avx512_store16<FULL, NT>(p, avx512_to_f16(x), k);
}

struct Avx512Consts {
    __m512 b1, omb1, b2, omb2, bc1, bc2, eps, wd, nlr, gs;
};

template <typename Tg, typename Tp, bool HASP, bool FULL, bool NT>
ZA_AVX512_INL void avx512_body(float* w, float* m, float* v, const Tg* g, Tp* p, __mmask16 k, const Avx512Consts& c,
                               Avx512Rng& rng, uint64_t idx) {
    const __m512 gv = _mm512_mul_ps(avx512_load_grad(g, k), c.gs);
    const __m512 mv = _mm512_fmadd_ps(c.b1, _mm512_maskz_loadu_ps(k, m), _mm512_mul_ps(c.omb1, gv));
    const __m512 vv = _mm512_fmadd_ps(c.b2, _mm512_maskz_loadu_ps(k, v), _mm512_mul_ps(_mm512_mul_ps(c.omb2, gv), gv));
    const __m512 mhat = _mm512_div_ps(mv, c.bc1);
    const __m512 vhat = _mm512_div_ps(vv, c.bc2);
    const __m512 t = _mm512_div_ps(mhat, _mm512_add_ps(_mm512_sqrt_ps(vhat), c.eps));
    __m512 wv = _mm512_maskz_loadu_ps(k, w);
    wv = _mm512_fmadd_ps(c.nlr, _mm512_fmadd_ps(c.wd, wv, t), wv);
    _mm512_mask_storeu_ps(m, k, mv);
    _mm512_mask_storeu_ps(v, k, vv);
    _mm512_mask_storeu_ps(w, k, wv);
    if (HASP) avx512_store_param<FULL, NT>(p, wv, k, rng, idx);
}

template <typename Tg, typename Tp, bool HASP, bool NT>
ZA_AVX512 void range_avx512_impl(float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const Consts& c,
                                 uint64_t off) {
    Avx512Consts k;
    k.b1 = _mm512_set1_ps(c.b1), k.omb1 = _mm512_set1_ps(c.omb1);
    k.b2 = _mm512_set1_ps(c.b2), k.omb2 = _mm512_set1_ps(c.omb2);
    k.bc1 = _mm512_set1_ps(c.bc1), k.bc2 = _mm512_set1_ps(c.bc2);
    k.eps = _mm512_set1_ps(c.eps), k.wd = _mm512_set1_ps(c.wd);
    k.nlr = _mm512_set1_ps(c.nlr), k.gs = _mm512_set1_ps(c.gs);
    Avx512Rng rng{c.seed, (uint32_t)(off >> 32), _mm512_set1_epi32((int)rounding_key(c.seed, (uint32_t)(off >> 32)))};
    size_t i = 0;
    for (; i + 16 <= n; i += 16)
        avx512_body<Tg, Tp, HASP, true, NT>(w + i, m + i, v + i, g + i, HASP ? p + i : p, (__mmask16)0xffff, k, rng,
                                            off + i);
    if (i < n)
        avx512_body<Tg, Tp, HASP, false, false>(w + i, m + i, v + i, g + i, HASP ? p + i : p,
                                                (__mmask16)((1u << (n - i)) - 1u), k, rng, off + i);
    if (NT) _mm_sfence();
}

#endif  // ZERO_CPU_ADAMW_X86

// Streaming stores of the param copy need p aligned to one vector store; a few
// scalar elements first get it there.
template <typename Tg, typename Tp>
void run_range(CpuIsa isa, bool nt, float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const Consts& c,
               uint64_t off) {
#if ZERO_CPU_ADAMW_X86
    if (isa == CpuIsa::AVX2 || isa == CpuIsa::AVX512) {
        const size_t store_bytes = (isa == CpuIsa::AVX512 ? 16 : 8) * sizeof(Tp);
        if (nt && p && ((uintptr_t)p % sizeof(Tp)) == 0) {
            size_t head = ((store_bytes - (uintptr_t)p % store_bytes) % store_bytes) / sizeof(Tp);
            head = std::min(head, n);
            if (head) range_scalar(w, m, v, g, p, head, c, off);
            w += head, m += head, v += head, g += head, p += head, n -= head, off += head;
        } else {
            nt = false;
        }
        if (isa == CpuIsa::AVX512) {
            if (!p) range_avx512_impl<Tg, Tp, false, false>(w, m, v, g, p, n, c, off);
            else if (nt) range_avx512_impl<Tg, Tp, true, true>(w, m, v, g, p, n, c, off);
            else range_avx512_impl<Tg, Tp, true, false>(w, m, v, g, p, n, c, off);
        } else {
            if (!p) range_avx2_impl<Tg, Tp, false, false>(w, m, v, g, p, n, c, off);
            else if (nt) range_avx2_impl<Tg, Tp, true, true>(w, m, v, g, p, n, c, off);
            else range_avx2_impl<Tg, Tp, true, false>(w, m, v, g, p, n, c, off);
        }
        return;
    }
#else
    (void)isa;
    (void)nt;
#endif
    range_scalar(w, m, v, g, p, n, c, off);
}

// CPUID + XGETBV (the OS must save the vector registers too): what this CPU can run.
struct CpuFeatures {
    bool avx2 = false;    // AVX2 + FMA + F16C
    bool avx512 = false;  // AVX-512 F + BW + VL
};

inline CpuFeatures detect_features() {
    CpuFeatures f;
#if ZERO_CPU_ADAMW_X86
    unsigned a, b, c, d;
    if (!__get_cpuid(0, &a, &b, &c, &d) || a < 7) return f;
    __get_cpuid(1, &a, &b, &c, &d);
    const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
    if (!(osxsave && avx)) return f;
    unsigned xlo;
    [[maybe_unused]] unsigned xhi;  // the upper half of XCR0 holds no state we need
    __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
    const bool os_avx = (xlo & 0x6u) == 0x6u;       // SSE and AVX state
    const bool os_avx512 = (xlo & 0xe6u) == 0xe6u;  // + opmask, upper ZMM, ZMM16-31
    __get_cpuid_count(7, 0, &a, &b, &c, &d);
    const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512bw = b & (1u << 30), avx512vl = b & (1u << 31);
    f.avx2 = os_avx && avx2 && fma && f16c;
    f.avx512 = f.avx2 && os_avx512 && avx512f && avx512bw && avx512vl;
#endif
    return f;
}

inline bool isa_supported(CpuIsa isa) {
    static const CpuFeatures f = detect_features();
    if (isa == CpuIsa::Scalar) return true;
    if (isa == CpuIsa::AVX2) return f.avx2;
    if (isa == CpuIsa::AVX512) return f.avx512;
    return false;
}

inline CpuIsa best_isa() {
    if (isa_supported(CpuIsa::AVX512)) return CpuIsa::AVX512;
    if (isa_supported(CpuIsa::AVX2)) return CpuIsa::AVX2;
    return CpuIsa::Scalar;
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
inline std::vector<int> parse_cpu_list(const char* s) {
    std::vector<int> out;
    while (*s) {
        char* end;
        long a = strtol(s, &end, 10);
        if (end == s) break;
        long b = a;
        s = end;
        if (*s == '-') {
            b = strtol(s + 1, &end, 10);
            s = end;
        }
        for (long x = a; x <= b; x++) out.push_back((int)x);
        while (*s == ',' || *s == '\n' || *s == ' ') s++;
    }
    return out;
}

// The CPUs this process may run on, one hardware thread of every physical core
// first (lowest id first), then the second SMT siblings, and so on.
inline std::vector<int> allowed_cpus() {
    std::vector<int> cpus;
#if defined(__linux__)
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) cpus.push_back(c);
    std::vector<std::pair<int, int>> ranked;  // (position among its SMT siblings, cpu)
    for (int c : cpus) {
        int rank = 0;
        char path[128];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/thread_siblings_list", c);
        if (FILE* f = fopen(path, "r")) {
            char buf[256] = {0};
            if (fgets(buf, sizeof(buf), f)) {
                for (int s : parse_cpu_list(buf))
                    if (s < c) rank++;
            }
            fclose(f);
        }
        ranked.push_back({rank, c});
    }
    std::sort(ranked.begin(), ranked.end());
    cpus.clear();
    for (auto& r : ranked) cpus.push_back(r.second);
#endif
    if (cpus.empty()) {
        unsigned hc = std::thread::hardware_concurrency();
        for (unsigned c = 0; c < std::max(1u, hc); c++) cpus.push_back((int)c);
    }
    return cpus;
}

// The next `count` cores of the process-wide cursor: CpuAdamW objects created
// one after another get disjoint cores while there are enough.
inline std::vector<int> take_cores(int count) {
    static std::atomic<size_t> cursor{0};
    static const std::vector<int> cpus = allowed_cpus();
    const size_t start = cursor.fetch_add((size_t)count);
    std::vector<int> out;
    for (int j = 0; j < count; j++) out.push_back(cpus[(start + (size_t)j) % cpus.size()]);
    return out;
}

inline void cpu_relax() {
#if ZERO_CPU_ADAMW_X86
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// One round of a bounded spin: a pause, every 64th round a yield (so that on an
// oversubscribed machine the threads with work get the core) and a look at the
// clock; true once spin_us have passed.
inline bool spin_should_sleep(unsigned it, std::chrono::steady_clock::time_point t0, int spin_us) {
    cpu_relax();
    if ((it & 63) != 63) return false;
    std::this_thread::yield();
    return std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(spin_us);
}

}  // namespace cpu_adamw_detail

class CpuAdamW {
   public:
    // num_threads <= 0: as many as this process has CPUs. cores: see the header
    // comment (empty: the process-wide cursor). pin = false leaves every thread
    // to the OS scheduler.
    explicit CpuAdamW(int num_threads = 0, const std::vector<int>& cores = {}, CpuIsa isa = CpuIsa::Auto,
                      bool pin = true) {
        if (num_threads <= 0) num_threads = (int)cpu_adamw_detail::allowed_cpus().size();
        nthreads_ = std::min(std::max(1, num_threads), 1024);
        isa_ = cpu_adamw_detail::best_isa();
        if (isa != CpuIsa::Auto) force_isa(isa);
        if (pin) {
            if (cores.empty()) {
                cores_ = cpu_adamw_detail::take_cores(nthreads_);
            } else {
                for (int j = 0; j < nthreads_; j++) cores_.push_back(cores[(size_t)j % cores.size()]);
            }
        } else {
            cores_.assign((size_t)nthreads_, -1);
        }
        for (int id = 1; id < nthreads_; id++) workers_.emplace_back([this, id] { worker_loop(id); });
    }

    ~CpuAdamW() {
        stop_.store(true);
        publish(0);
        for (auto& t : workers_) t.join();
    }

    CpuAdamW(const CpuAdamW&) = delete;
    CpuAdamW& operator=(const CpuAdamW&) = delete;

    // master, m, v: fp32 (n), updated in place; grad: Tg (n); param_out: Tp (n)
    // or null. Element i is element full_offset + i of the full flat buffer
    // (the key of the bf16 stochastic rounding). Blocks until done.
    template <typename Tg, typename Tp>
    void step(float* master, float* m, float* v, const Tg* grad, Tp* param_out, size_t n, const AdamWStep& s,
              size_t full_offset) {
        if (n == 0) return;
        Job& j = job_;
        j.fn = &run_chunk<Tg, Tp>;
        j.w = master, j.m = m, j.v = v, j.g = grad, j.p = param_out;
        j.n = n;
        j.c = cpu_adamw_detail::make_consts(s);
        j.off = full_offset;
        j.isa = isa_;
        j.nt = param_out != nullptr && n >= nt_threshold_;
        j.align = (size_t)(((uintptr_t)master / sizeof(float)) & 15);
#if ZERO_CPU_ADAMW_X86
        j.mxcsr = _mm_getcsr();
#endif
        const size_t per = std::max<size_t>(16, min_per_thread_);
        const size_t parts = std::min<size_t>((size_t)nthreads_, n / per);
        if (parts <= 1) {  // small: the caller alone, no hand-off
            j.chunk = n + j.align;
            j.nchunks = 1;
            run_chunk<Tg, Tp>(j, 0);
            return;
        }
        // kChunksPerThread chunks per participant (but none below min_per_thread),
        // multiples of 16 elements, edges on 64-byte lines of master
        size_t chunk = std::max(per, (n + parts * kChunksPerThread - 1) / (parts * kChunksPerThread));
        chunk = std::max(chunk, (n + j.align + kMaxChunks - 1) / kMaxChunks);
        chunk = (chunk + 15) / 16 * 16;
        j.chunk = chunk;
        j.nchunks = (n + j.align + chunk - 1) / chunk;
        done_.store(0, std::memory_order_relaxed);
        publish(j.nchunks);
        work(gen_seq_);
        wait_done(j.nchunks);
    }
    // no compute-dtype copy
    template <typename Tg>
    void step(float* master, float* m, float* v, const Tg* grad, std::nullptr_t, size_t n, const AdamWStep& s,
              size_t full_offset) {
        step<Tg, float>(master, m, v, grad, (float*)nullptr, n, s, full_offset);
    }

    const char* isa() const { return cpu_isa_name(isa_); }
    CpuIsa isa_id() const { return isa_; }
    // Selects a code path (Auto: the best available); false (and no change) if
    // this CPU lacks it.
    bool force_isa(CpuIsa isa) {
        if (isa == CpuIsa::Auto) isa = cpu_adamw_detail::best_isa();
        if (!cpu_adamw_detail::isa_supported(isa)) return false;
        isa_ = isa;
        return true;
    }
    static bool isa_supported(CpuIsa isa) { return cpu_adamw_detail::isa_supported(isa); }
    static CpuIsa best_isa() { return cpu_adamw_detail::best_isa(); }

    int num_threads() const { return nthreads_; }
    // cores()[0]: the caller's nominal core (not pinned); cores()[j]: worker j; -1 = not pinned
    const std::vector<int>& cores() const { return cores_; }

    // Fewest elements worth a participant (and a chunk) of their own; below
    // 2x this a call runs on the calling thread alone. Default 4096 (~120 KB of traffic).
    void set_min_per_thread(size_t n) { min_per_thread_ = n; }
    size_t min_per_thread() const { return min_per_thread_; }
    // Calls with at least this many elements write the param copy with
    // streaming (non-temporal) stores: no read-for-ownership of a buffer that is
    // only written. Default 1M elements; SIZE_MAX: never.
    void set_streaming_threshold(size_t n) { nt_threshold_ = n; }
    // How long idle workers (and the caller waiting for them) spin before they sleep (default 200 us).
    void set_spin_us(int us) { spin_us_.store(us, std::memory_order_relaxed); }

   private:
    static constexpr size_t kChunksPerThread = 4;
    static constexpr size_t kMaxChunks = 0xffff;

    struct Job {
        void (*fn)(const Job&, size_t chunk);
        float *w, *m, *v;
        const void* g;
        void* p;
        size_t n, off, align, chunk, nchunks;
        cpu_adamw_detail::Consts c;
        CpuIsa isa;
        bool nt;
        unsigned mxcsr;
    };

    // Chunk k is [k*chunk - align, (k+1)*chunk - align) clipped to [0, n).
    template <typename Tg, typename Tp>
    static void run_chunk(const Job& j, size_t k) {
        const size_t b = k == 0 ? 0 : std::min(j.n, k * j.chunk - j.align);
        const size_t e = std::min(j.n, (k + 1) * j.chunk - j.align);
        if (e <= b) return;
        const Tg* g = static_cast<const Tg*>(j.g);
        Tp* p = static_cast<Tp*>(j.p);
        cpu_adamw_detail::run_range<Tg, Tp>(j.isa, j.nt, j.w + b, j.m + b, j.v + b, g + b, p ? p + b : nullptr, e - b,
                                            j.c, j.off + b);
    }

    // The work word: generation (upper 32 bits) | next chunk to claim (16) |
    // number of chunks (16). Threads claim chunks of the current generation by
    // compare-and-swap, so whoever is running does the work: a worker that the
    // OS has not scheduled yet delays nothing but the chunk it holds. A claim
    // can only succeed while the caller waits for that generation, so job_ is
    // stable for whoever holds a claim.
    void publish(size_t nchunks) {
        gen_seq_ = (gen_seq_ + 1) & 0xffffffffu;
        work_.store((uint64_t)gen_seq_ << 32 | (uint64_t)nchunks, std::memory_order_seq_cst);
        if (sleepers_.load(std::memory_order_seq_cst) > 0) {
            std::lock_guard<std::mutex> lk(mu_);
            cv_work_.notify_all();
        }
    }

    // Claims and runs chunks of generation `gen` until none is left.
    void work(uint64_t gen) {
        uint64_t w = work_.load(std::memory_order_acquire);
        for (;;) {
            if ((w >> 32) != gen) return;
            const uint64_t next = (w >> 16) & 0xffff, count = w & 0xffff;
            if (next >= count) return;
            if (!work_.compare_exchange_weak(w, w + (1u << 16), std::memory_order_acq_rel, std::memory_order_acquire))
                continue;
#if ZERO_CPU_ADAMW_X86
            if (_mm_getcsr() != job_.mxcsr) _mm_setcsr(job_.mxcsr);  // the caller's rounding and denormal modes
#endif
            job_.fn(job_, (size_t)next);
            if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == count) {
                std::lock_guard<std::mutex> lk(mu_);
                cv_done_.notify_all();
            }
            w = work_.load(std::memory_order_acquire);
        }
    }

    void wait_done(size_t nchunks) {
        const auto t0 = std::chrono::steady_clock::now();
        const int spin_us = spin_us_.load(std::memory_order_relaxed);
        for (unsigned it = 0; done_.load(std::memory_order_acquire) != nchunks; it++) {
            if (cpu_adamw_detail::spin_should_sleep(it, t0, spin_us)) {
                std::unique_lock<std::mutex> lk(mu_);
                cv_done_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == nchunks; });
                break;
            }
        }
    }

    void worker_loop(int id) {
#if defined(__linux__)
        if (cores_[(size_t)id] >= 0) {
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cores_[(size_t)id], &set);
            pthread_setaffinity_np(pthread_self(), sizeof(set), &set);  // a core we may not use: stays unpinned
        }
#else
        (void)id;
#endif
        uint64_t seen = 0;  // the last generation this worker looked at
        for (;;) {
            uint64_t g = work_.load(std::memory_order_acquire) >> 32;
            if (g == seen) {
                const auto t0 = std::chrono::steady_clock::now();
                const int spin_us = spin_us_.load(std::memory_order_relaxed);
                for (unsigned it = 0; (g = work_.load(std::memory_order_acquire) >> 32) == seen; it++) {
                    if (cpu_adamw_detail::spin_should_sleep(it, t0, spin_us)) {
                        std::unique_lock<std::mutex> lk(mu_);
                        sleepers_.fetch_add(1, std::memory_order_seq_cst);
                        cv_work_.wait(lk, [&] { return (work_.load(std::memory_order_seq_cst) >> 32) != seen; });
                        sleepers_.fetch_sub(1, std::memory_order_relaxed);
                        g = work_.load(std::memory_order_acquire) >> 32;
                        break;
                    }
                }
            }
            seen = g;
            if (stop_.load()) return;
            work(g);
        }
    }

    int nthreads_ = 1;
    CpuIsa isa_ = CpuIsa::Scalar;
    std::vector<int> cores_;
    size_t min_per_thread_ = 4096;
    size_t nt_threshold_ = (size_t)1 << 20;
    std::atomic<int> spin_us_{200};

    Job job_{};
    uint64_t gen_seq_ = 0;  // the caller's generation counter
    std::vector<std::thread> workers_;
    std::atomic<uint64_t> work_{0};
    std::atomic<size_t> done_{0};
    std::atomic<int> sleepers_{0};
    std::atomic<bool> stop_{false};
    std::mutex mu_;
    std::condition_variable cv_work_, cv_done_;
};

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
