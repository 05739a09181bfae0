// CpuAdamW (kernels/cpu/adamw_simd.h): the code paths, their run-time
// dispatch, and the thread pool that runs them.
// One unit: the pool's chunks call the paths' templates (run_range) directly, so
// both are instantiated here, once per (grad, param) pair of CpuAdamW::step.
//
// The AVX2 and AVX-512 paths are one body (kernels/cpu/adamw_simd_body.inc)
// templated over an ISA trait: a struct per instruction set below gives the
// register types and wraps the intrinsics the body needs (loads and stores,
// arithmetic, compares and selects, 16-bit conversions), and says how a tail
// shorter than a vector is done (AVX-512: one masked vector; AVX2: the scalar
// path). The traits carry their target attributes, and the body is compiled
// once per ISA inside a target region, so this file builds whatever -march is
// and each path runs only where the CPU has it.
#include "kernels/cpu/adamw_simd.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>
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
#include "zero/base/common.h"
#include "zero/base/dtype.h"
#include "zero/base/rng.h"

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wall
// reports as "may be used uninitialized" when they are inlined (GCC PR 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

const char* cpu_isa_name(CpuIsa isa) {
    static const char* const names[] = {"scalar", "avx2", "avx512"};  // by CpuIsa's value
    return isa == CpuIsa::Scalar || isa == CpuIsa::AVX2 || isa == CpuIsa::AVX512 ? names[(int)isa] : "auto";
}

namespace cpu_adamw_detail {

Consts make_consts(const AdamWStep& s) {
    return {.b1 = s.beta1, .omb1 = 1.0f - s.beta1, .b2 = s.beta2, .omb2 = 1.0f - s.beta2, .bc1 = s.bias_correction1,
            .bc2 = s.bias_correction2, .eps = s.eps, .wd = s.weight_decay, .nlr = -s.lr, .gs = s.grad_scale,
            .seed = s.rounding_seed};
}

// The stochastic-rounding key of the high half of an index (see rounding_bits).
uint32_t rounding_key(uint64_t seed, uint32_t hi) { return mix32(hi ^ (uint32_t)seed) ^ (uint32_t)(seed >> 32); }

// Scalar path (also the tails of the AVX2 path). std::fma makes the fused steps
// explicit, so the compiler's contraction choices cannot change them.
template <typename Tg, typename Tp>
void range_scalar(float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const Consts& c, uint64_t off) {
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

#define ZA_AVX2_ISA "avx2,fma,f16c"
#define ZA_AVX512_ISA "avx512f,avx512bw,avx512vl,avx2,fma,f16c"
#define ZA_AVX2_INL __attribute__((target(ZA_AVX2_ISA), always_inline)) static inline
#define ZA_AVX512_INL __attribute__((target(ZA_AVX512_ISA), always_inline)) static inline

// ---------------------------------------------------------------------------
// The ISA traits. F: W floats; I: W 32-bit integers; H: W 16-bit values
// (packed); compares give a lane mask, which select(mask, yes, no) and
// or_where(mask, x, y) (x | y in the mask's lanes) take. Every access names its
// lanes: all() (whole vectors), or with AVX-512 a tail mask.

// AVX2 + FMA + F16C: 8 lanes; a tail shorter than a vector takes the scalar path.
struct Avx2 {
    static constexpr int W = 8;
    static constexpr bool kMaskedTail = false;
    using F = __m256;
    using I = __m256i;
    using H = __m128i;
    struct Full {};
    ZA_AVX2_INL Full all() { return {}; }

    ZA_AVX2_INL F set1(float x) { return _mm256_set1_ps(x); }
    ZA_AVX2_INL I set1i(uint32_t x) { return _mm256_set1_epi32((int)x); }
    ZA_AVX2_INL I iota() { return _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7); }
    ZA_AVX2_INL F as_float(I x) { return _mm256_castsi256_ps(x); }
    ZA_AVX2_INL I as_int(F x) { return _mm256_castps_si256(x); }

    ZA_AVX2_INL F load(const float* p, Full) { return _mm256_loadu_ps(p); }
    ZA_AVX2_INL void store(float* p, Full, F x) { _mm256_storeu_ps(p, x); }
    ZA_AVX2_INL void stream(float* p, F x) { _mm256_stream_ps(p, x); }
    ZA_AVX2_INL H load16(const void* p, Full) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
    ZA_AVX2_INL void store16(void* p, Full, H h) { _mm_storeu_si128(reinterpret_cast<__m128i*>(p), h); }
    ZA_AVX2_INL void stream16(void* p, H h) { _mm_stream_si128(reinterpret_cast<__m128i*>(p), h); }
    ZA_AVX2_INL I load_u32(const uint32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
    ZA_AVX2_INL void store_u32(uint32_t* p, I x) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), x); }

    ZA_AVX2_INL F add(F a, F b) { return _mm256_add_ps(a, b); }
    ZA_AVX2_INL F mul(F a, F b) { return _mm256_mul_ps(a, b); }
    ZA_AVX2_INL F div(F a, F b) { return _mm256_div_ps(a, b); }
    ZA_AVX2_INL F sqrt(F a) { return _mm256_sqrt_ps(a); }
    ZA_AVX2_INL F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }

    ZA_AVX2_INL I add(I a, I b) { return _mm256_add_epi32(a, b); }
    ZA_AVX2_INL I mullo(I a, I b) { return _mm256_mullo_epi32(a, b); }
    ZA_AVX2_INL I and_(I a, I b) { return _mm256_and_si256(a, b); }
    ZA_AVX2_INL I or_(I a, I b) { return _mm256_or_si256(a, b); }
    ZA_AVX2_INL I xor_(I a, I b) { return _mm256_xor_si256(a, b); }
    ZA_AVX2_INL I srl15(I x) { return _mm256_srli_epi32(x, 15); }
    ZA_AVX2_INL I srl16(I x) { return _mm256_srli_epi32(x, 16); }
    ZA_AVX2_INL I sll16(I x) { return _mm256_slli_epi32(x, 16); }

    // masks are vectors with all bits set in the true lanes (signed compares)
    ZA_AVX2_INL I gt(I a, I b) { return _mm256_cmpgt_epi32(a, b); }
    ZA_AVX2_INL I eq(I a, I b) { return _mm256_cmpeq_epi32(a, b); }
    ZA_AVX2_INL F is_nan(F x) { return _mm256_cmp_ps(x, x, _CMP_UNORD_Q); }
    ZA_AVX2_INL I select(I mask, I yes, I no) { return _mm256_blendv_epi8(no, yes, mask); }
    ZA_AVX2_INL F select(F mask, F yes, F no) { return _mm256_blendv_ps(no, yes, mask); }
    ZA_AVX2_INL I or_where(I mask, I x, I y) { return _mm256_or_si256(x, _mm256_and_si256(mask, y)); }

    ZA_AVX2_INL I widen16(H h) { return _mm256_cvtepu16_epi32(h); }
    // 32-bit lanes holding values <= 0xffff, packed; packus interleaves the
    // 128-bit halves, the permute restores the order
    ZA_AVX2_INL H narrow16(I x) {
        return _mm256_castsi256_si128(_mm256_permute4x64_epi64(_mm256_packus_epi32(x, x), 0xd8));
    }
    ZA_AVX2_INL F f16_to_f32(H h) { return _mm256_cvtph_ps(h); }
    ZA_AVX2_INL H f32_to_f16(F x) { return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
};

// AVX-512 (F, BW, VL): 16 lanes; a tail shorter than a vector is one masked vector.
struct Avx512 {
    static constexpr int W = 16;
    static constexpr bool kMaskedTail = true;
    using F = __m512;
    using I = __m512i;
    using H = __m256i;
    struct Full {};
    using Tail = __mmask16;
    ZA_AVX512_INL Full all() { return {}; }
    ZA_AVX512_INL Tail tail(size_t n) { return (__mmask16)((1u << n) - 1u); }  // the first n < 16 lanes

    ZA_AVX512_INL F set1(float x) { return _mm512_set1_ps(x); }
    ZA_AVX512_INL I set1i(uint32_t x) { return _mm512_set1_epi32((int)x); }
    ZA_AVX512_INL I iota() { return _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
    ZA_AVX512_INL F as_float(I x) { return _mm512_castsi512_ps(x); }
    ZA_AVX512_INL I as_int(F x) { return _mm512_castps_si512(x); }

    ZA_AVX512_INL F load(const float* p, Full) { return _mm512_loadu_ps(p); }
    ZA_AVX512_INL F load(const float* p, Tail k) { return _mm512_maskz_loadu_ps(k, p); }
    ZA_AVX512_INL void store(float* p, Full, F x) { _mm512_storeu_ps(p, x); }
    ZA_AVX512_INL void store(float* p, Tail k, F x) { _mm512_mask_storeu_ps(p, k, x); }
    ZA_AVX512_INL void stream(float* p, F x) { _mm512_stream_ps(p, x); }
    ZA_AVX512_INL H load16(const void* p, Full) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
    ZA_AVX512_INL H load16(const void* p, Tail k) { return _mm256_maskz_loadu_epi16(k, p); }
    ZA_AVX512_INL void store16(void* p, Full, H h) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), h); }
    ZA_AVX512_INL void store16(void* p, Tail k, H h) { _mm256_mask_storeu_epi16(p, k, h); }
    ZA_AVX512_INL void stream16(void* p, H h) { _mm256_stream_si256(reinterpret_cast<__m256i*>(p), h); }
    ZA_AVX512_INL I load_u32(const uint32_t* p) { return _mm512_loadu_si512(p); }
    ZA_AVX512_INL void store_u32(uint32_t* p, I x) { _mm512_storeu_si512(p, x); }

    ZA_AVX512_INL F add(F a, F b) { return _mm512_add_ps(a, b); }
    ZA_AVX512_INL F mul(F a, F b) { return _mm512_mul_ps(a, b); }
    ZA_AVX512_INL F div(F a, F b) { return _mm512_div_ps(a, b); }
    ZA_AVX512_INL F sqrt(F a) { return _mm512_sqrt_ps(a); }
    ZA_AVX512_INL F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }

    ZA_AVX512_INL I add(I a, I b) { return _mm512_add_epi32(a, b); }
    ZA_AVX512_INL I mullo(I a, I b) { return _mm512_mullo_epi32(a, b); }
    ZA_AVX512_INL I and_(I a, I b) { return _mm512_and_si512(a, b); }
    ZA_AVX512_INL I or_(I a, I b) { return _mm512_or_si512(a, b); }
    ZA_AVX512_INL I xor_(I a, I b) { return _mm512_xor_si512(a, b); }
    ZA_AVX512_INL I srl15(I x) { return _mm512_srli_epi32(x, 15); }
    ZA_AVX512_INL I srl16(I x) { return _mm512_srli_epi32(x, 16); }
    ZA_AVX512_INL I sll16(I x) { return _mm512_slli_epi32(x, 16); }

    // masks are mask registers, one bit per lane (signed compares)
    ZA_AVX512_INL __mmask16 gt(I a, I b) { return _mm512_cmpgt_epi32_mask(a, b); }
    ZA_AVX512_INL __mmask16 eq(I a, I b) { return _mm512_cmpeq_epi32_mask(a, b); }
    ZA_AVX512_INL __mmask16 is_nan(F x) { return _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q); }
    ZA_AVX512_INL I select(__mmask16 k, I yes, I no) { return _mm512_mask_blend_epi32(k, no, yes); }
    ZA_AVX512_INL F select(__mmask16 k, F yes, F no) { return _mm512_mask_blend_ps(k, no, yes); }
    ZA_AVX512_INL I or_where(__mmask16 k, I x, I y) { return _mm512_mask_or_epi32(x, k, x, y); }

    ZA_AVX512_INL I widen16(H h) { return _mm512_cvtepu16_epi32(h); }
    ZA_AVX512_INL H narrow16(I x) { return _mm512_cvtepi32_epi16(x); }  // values <= 0xffff
    ZA_AVX512_INL F f16_to_f32(H h) { return _mm512_cvtph_ps(h); }
    ZA_AVX512_INL H f32_to_f16(F x) { return _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
};

// ---------------------------------------------------------------------------
// The body, once per ISA. Every function defined between ZA_TARGET_BEGIN(isa)
// and ZA_TARGET_END compiles for `isa` (GCC's target pragma, Clang's pragma
// attribute); the templates of adamw_simd_body.inc take it from there.

#define ZA_PRAGMA(...) _Pragma(#__VA_ARGS__)
#if defined(__clang__)
#define ZA_TARGET_BEGIN(isa) ZA_PRAGMA(clang attribute push(__attribute__((target(isa))), apply_to = function))
#define ZA_TARGET_END ZA_PRAGMA(clang attribute pop)
#else
#define ZA_TARGET_BEGIN(isa) ZA_PRAGMA(GCC push_options) ZA_PRAGMA(GCC target(isa))
#define ZA_TARGET_END ZA_PRAGMA(GCC pop_options)
#endif

ZA_TARGET_BEGIN(ZA_AVX2_ISA)
namespace avx2_path {
#include "kernels/cpu/adamw_simd_body.inc"
}  // namespace avx2_path
ZA_TARGET_END

ZA_TARGET_BEGIN(ZA_AVX512_ISA)
namespace avx512_path {
#include "kernels/cpu/adamw_simd_body.inc"
}  // namespace avx512_path
ZA_TARGET_END

#endif  // ZERO_CPU_ADAMW_X86

// Streaming stores of the param copy need p aligned to one vector store; a few
// scalar elements first get it there.
template <typename Tg, typename Tp>
void run_range(CpuIsa isa, bool nt, float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const Consts& c,
               uint64_t off) {
#if ZERO_CPU_ADAMW_X86
    if (isa == CpuIsa::AVX2 || isa == CpuIsa::AVX512) {
        const size_t store_bytes = (isa == CpuIsa::AVX512 ? Avx512::W : Avx2::W) * sizeof(Tp);
        if (nt && p && ((uintptr_t)p % sizeof(Tp)) == 0) {
            size_t head = ((store_bytes - (uintptr_t)p % store_bytes) % store_bytes) / sizeof(Tp);
            head = std::min(head, n);
            if (head) range_scalar(w, m, v, g, p, head, c, off);
            w += head, m += head, v += head, g += head, p += head, n -= head, off += head;
        } else {
            nt = false;
        }
        if (isa == CpuIsa::AVX512) {
            if (!p) avx512_path::range<Avx512, Tg, Tp, false, false>(w, m, v, g, p, n, c, off);
            else if (nt) avx512_path::range<Avx512, Tg, Tp, true, true>(w, m, v, g, p, n, c, off);
            else avx512_path::range<Avx512, Tg, Tp, true, false>(w, m, v, g, p, n, c, off);
        } else {
            if (!p) avx2_path::range<Avx2, Tg, Tp, false, false>(w, m, v, g, p, n, c, off);
            else if (nt) avx2_path::range<Avx2, Tg, Tp, true, true>(w, m, v, g, p, n, c, off);
            else avx2_path::range<Avx2, Tg, Tp, true, false>(w, m, v, g, p, n, c, off);
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

CpuFeatures detect_features() {
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

bool isa_supported(CpuIsa isa) {
    static const CpuFeatures f = detect_features();
    return isa == CpuIsa::Scalar || (isa == CpuIsa::AVX2 && f.avx2) || (isa == CpuIsa::AVX512 && f.avx512);
}

CpuIsa best_isa() {
    if (isa_supported(CpuIsa::AVX512)) return CpuIsa::AVX512;
    if (isa_supported(CpuIsa::AVX2)) return CpuIsa::AVX2;
    return CpuIsa::Scalar;
}

// "0-3,8,10-11" -> {0,1,2,3,8,10,11}
std::vector<int> parse_cpu_list(const char* s) {
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

std::vector<int> allowed_cpus() {
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
std::vector<int> take_cores(int count) {
    static std::atomic<size_t> cursor{0};
    static const std::vector<int> cpus = allowed_cpus();
    const size_t start = cursor.fetch_add((size_t)count);
    std::vector<int> out;
    for (int j = 0; j < count; j++) out.push_back(cpus[(start + (size_t)j) % cpus.size()]);
    return out;
}

void cpu_relax() {
#if ZERO_CPU_ADAMW_X86
    _mm_pause();
#else
    std::this_thread::yield();
#endif
}

// One round of a bounded spin: a pause, every 64th round a yield (so that on an
// oversubscribed machine the threads with work get the core) and a look at the
// clock; true once spin_us have passed.
bool spin_should_sleep(unsigned it, std::chrono::steady_clock::time_point t0, int spin_us) {
    cpu_relax();
    if ((it & 63) != 63) return false;
    std::this_thread::yield();
    return std::chrono::steady_clock::now() - t0 > std::chrono::microseconds(spin_us);
}

// ---------------------------------------------------------------------------
// The building blocks for the tests

// The vector ISA a test asked for, checked: AVX2 or AVX512, and on this CPU.
static CpuIsa vector_isa(CpuIsa isa, const char* what) {
    CHECK((isa == CpuIsa::AVX2 || isa == CpuIsa::AVX512) && isa_supported(isa), "%s: no %s path on this CPU", what,
          cpu_isa_name(isa));
    return isa;
}

// The AVX-512 or the AVX2 instance of the body's template fn, as the test
// `what` asked for (checked; where no vector path is compiled, only the check).
#if ZERO_CPU_ADAMW_X86
#define ZA_VECTOR_CALL(isa, what, fn, ...)                                          \
    (vector_isa(isa, what) == CpuIsa::AVX512 ? avx512_path::fn<Avx512>(__VA_ARGS__) \
                                             : avx2_path::fn<Avx2>(__VA_ARGS__))
#else
#define ZA_VECTOR_CALL(isa, what, fn, ...) (void)vector_isa(isa, what)
#endif

void vector_to_f16(CpuIsa isa, const float* x, uint16_t* out, size_t n) {
    ZA_VECTOR_CALL(isa, "vector_to_f16", to_f16_array, x, out, n);
}
void vector_bf16_stochastic(CpuIsa isa, const float* x, const uint32_t* rnd, uint16_t* out, size_t n) {
    ZA_VECTOR_CALL(isa, "vector_bf16_stochastic", bf16_stochastic_array, x, rnd, out, n);
}
void vector_rounding_bits(CpuIsa isa, uint64_t seed, uint64_t idx, uint32_t* out) {
    ZA_VECTOR_CALL(isa, "vector_rounding_bits", rounding_bits_lanes, seed, idx, out);
}

}  // namespace cpu_adamw_detail

// ---------------------------------------------------------------------------
// CpuAdamW

CpuAdamW::CpuAdamW(int num_threads, const std::vector<int>& cores, CpuIsa isa, bool pin) {
    if (num_threads <= 0) num_threads = (int)cpu_adamw_detail::allowed_cpus().size();
    nthreads_ = std::min(std::max(1, num_threads), 1024);
    isa_ = cpu_adamw_detail::best_isa();
    if (isa != CpuIsa::Auto) force_isa(isa);
    if (!pin)
        cores_.assign((size_t)nthreads_, -1);
    else if (cores.empty())
        cores_ = cpu_adamw_detail::take_cores(nthreads_);
    else
        for (int j = 0; j < nthreads_; j++) cores_.push_back(cores[(size_t)j % cores.size()]);
    for (int id = 1; id < nthreads_; id++) workers_.emplace_back([this, id] { worker_loop(id); });
}

CpuAdamW::~CpuAdamW() {
    stop_.store(true);
    publish(0);
    for (auto& t : workers_) t.join();
}

template <typename Tg, typename Tp>
void CpuAdamW::step(float* master, float* m, float* v, const Tg* grad, Tp* param_out, size_t n, const AdamWStep& s,
                    size_t full_offset) {
    if (n == 0) return;
    job_ = {&run_chunk<Tg, Tp>, master, m, v, grad, param_out, n, full_offset, 0, 0, 0,
            cpu_adamw_detail::make_consts(s), isa_, param_out != nullptr && n >= nt_threshold_, 0};
    run_job();
}

// Every (grad, param) pair of float, bf16 and f16.
#define ZA_STEP(Tg, Tp) \
    template void CpuAdamW::step<Tg, Tp>(float*, float*, float*, const Tg*, Tp*, size_t, const AdamWStep&, size_t);
#define ZA_STEP_ALL_TP(Tg) ZA_STEP(Tg, float) ZA_STEP(Tg, bf16) ZA_STEP(Tg, f16)
ZA_STEP_ALL_TP(float)
ZA_STEP_ALL_TP(bf16)
ZA_STEP_ALL_TP(f16)

void CpuAdamW::run_job() {
    Job& j = job_;
    const size_t n = j.n;
    j.align = (size_t)(((uintptr_t)j.w / sizeof(float)) & 15);
#if ZERO_CPU_ADAMW_X86
    j.mxcsr = _mm_getcsr();
#endif
    const size_t per = std::max<size_t>(16, min_per_thread_);
    const size_t parts = std::min<size_t>((size_t)nthreads_, n / per);
    if (parts <= 1) {  // small: the caller alone, no hand-off
        j.chunk = n + j.align;
        j.nchunks = 1;
        j.fn(j, 0);
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

bool CpuAdamW::force_isa(CpuIsa isa) {
    if (isa == CpuIsa::Auto) isa = cpu_adamw_detail::best_isa();
    if (!cpu_adamw_detail::isa_supported(isa)) return false;
    isa_ = isa;
    return true;
}

bool CpuAdamW::isa_supported(CpuIsa isa) { return cpu_adamw_detail::isa_supported(isa); }
CpuIsa CpuAdamW::best_isa() { return cpu_adamw_detail::best_isa(); }

template <typename Tg, typename Tp>
void CpuAdamW::run_chunk(const Job& j, size_t k) {
    const size_t b = k == 0 ? 0 : std::min(j.n, k * j.chunk - j.align);
    const size_t e = std::min(j.n, (k + 1) * j.chunk - j.align);
    if (e <= b) return;
    const Tg* g = static_cast<const Tg*>(j.g);
    Tp* p = static_cast<Tp*>(j.p);
    cpu_adamw_detail::run_range<Tg, Tp>(j.isa, j.nt, j.w + b, j.m + b, j.v + b, g + b, p ? p + b : nullptr, e - b,
                                        j.c, j.off + b);
}

void CpuAdamW::publish(size_t nchunks) {
    gen_seq_ = (gen_seq_ + 1) & 0xffffffffu;
    work_.store((uint64_t)gen_seq_ << 32 | (uint64_t)nchunks, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) {
        std::lock_guard<std::mutex> lk(mu_);
        cv_work_.notify_all();
    }
}

void CpuAdamW::work(uint64_t gen) {
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

void CpuAdamW::wait_done(size_t nchunks) {
    const auto t0 = std::chrono::steady_clock::now();
    for (unsigned it = 0; done_.load(std::memory_order_acquire) != nchunks; it++) {
        if (cpu_adamw_detail::spin_should_sleep(it, t0, kSpinUs)) {
            std::unique_lock<std::mutex> lk(mu_);
            cv_done_.wait(lk, [&] { return done_.load(std::memory_order_acquire) == nchunks; });
            break;
        }
    }
}

void CpuAdamW::worker_loop(int id) {
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
            for (unsigned it = 0; (g = work_.load(std::memory_order_acquire) >> 32) == seen; it++) {
                if (cpu_adamw_detail::spin_should_sleep(it, t0, kSpinUs)) {
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
