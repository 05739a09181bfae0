// The CPU AdamW of optimizer offload (kernels/cpu/adamw_simd.h) against the scalar
// reference adamw_cpu<Tg,Tp> (kernels/cpu/adamw.h), compiled in this binary.
//
// What is checked, and how exactly:
//  * REF_FUSED builds (GCC with FMA in the target: the CMake suite's
//    -O2 -march=native on any AVX2 machine): CpuAdamW's fp32 master, m, v and the
//    compute-dtype copy are BIT-IDENTICAL to adamw_cpu, for every (Tg, Tp),
//    every code path this CPU has (forced in turn), thread counts 1, 2, 3, 8,
//    aligned and misaligned buffers, streaming and normal stores. NaN compares
//    equal to NaN (payloads may differ); nothing else is tolerated.
//  * Other builds (cpu_adamw_portable: -mno-avx ..., so adamw_cpu is compiled
//    without FMA contraction): CpuAdamW is bit-identical to the fused model
//    below (and so to itself on every path), and adamw_cpu is within a bound
//    derived per element from the four roundings that contraction removes
//    (printed: the largest error in units of that bound).
//  * Building blocks on their own: the vector fp16 conversion against
//    float_to_half_bits on every float of the exponents where rounding is
//    delicate (subnormal halves, the overflow edge, NaN/inf) and on structured
//    patterns of all the others; the vector bf16 stochastic rounding against
//    bf16_from_float_stochastic; the vector rounding bits against rounding_bits
//    on vectors that straddle 2^32 boundaries.
#include "kernels/cpu/adamw_simd.h"

#include <cfloat>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "test/test_util.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__FMA__)
#define REF_FUSED 1
#else
#define REF_FUSED 0
#endif

namespace {

template <typename T> const char* tname();
template <> const char* tname<float>() { return "f32"; }
template <> const char* tname<bf16>() { return "bf16"; }
template <> const char* tname<f16>() { return "f16"; }

// ---------------------------------------------------------------------------
// Value generation: never zero, wide magnitudes, and values on the rounding
// edges of the 2-byte dtypes.

struct Gen {
    std::mt19937_64 r;
    explicit Gen(uint64_t seed) : r(seed) {}
    uint32_t u32() { return (uint32_t)r(); }
    double uni() { return (r() >> 11) * (1.0 / 9007199254740992.0); }
    float sign() { return (r() & 1) ? -1.0f : 1.0f; }
    // |x| = 2^e * (1 + f), e uniform in [lo, hi)
    float wide(int lo, int hi) { return sign() * std::ldexp(1.0f + (float)uni(), lo + (int)(uni() * (hi - lo))); }
    float nudge(float x, int ulps) {  // x moved by a few float ulps
        int k = (int)(u32() % (2 * ulps + 1)) - ulps;
        uint32_t b = float_bits(x);
        return bits_float(b + (uint32_t)k);
    }
    // a value on (or a few ulps off) a rounding edge of fp16 or bf16
    float edge() {
        switch (u32() % 12) {
            case 0: {  // tie between two normal halves
                uint16_t h = (uint16_t)(0x0400 + u32() % (0x7bff - 0x0400));
                float a = half_bits_to_float(h), b = half_bits_to_float((uint16_t)(h + 1));
                return sign() * nudge(0.5f * (a + b), 2);
            }
            case 1: {  // tie between two subnormal halves
                float k = (float)(u32() % 1024);
                return sign() * nudge((k + 0.5f) * 5.9604644775390625e-8f, 2);
            }
            case 2: return sign() * nudge(2.98023223876953125e-8f, 3);        // 2^-25: half the smallest subnormal
            case 3: return sign() * nudge(6.103515625e-05f, 3);               // 2^-14: the smallest normal half
            case 4: return sign() * nudge(65504.0f, 3);                       // the largest half
            case 5: return sign() * nudge(65520.0f, 3);                       // rounds to inf
            case 6: return sign() * std::ldexp(1.0f + (float)uni(), 16 + (int)(u32() % 100));  // overflows fp16
            case 7: return sign() * std::ldexp(1.0f + (float)uni(), -25 + (int)(u32() % 11));  // fp16 subnormals
            case 8: return sign() * nudge(FLT_MAX, 40000);                    // bf16 rounding may carry into inf
            case 9: {  // on a bf16 value, or just below the next one
                uint32_t b = (u32() & 0x7fff0000u) | ((u32() & 1) ? 0xffffu : 0u);
                if ((b & 0x7f800000u) == 0x7f800000u || b == 0) b = 0x3f800000u;
                return sign() * bits_float(b);
            }
            case 10: return sign() * std::ldexp(1.0f + (float)uni(), -149 + (int)(u32() % 30));  // fp32 subnormals
            default: return wide(-30, 30);
        }
    }
};

template <typename T> T conv(float x) { return from_float<T>(x); }

// 2-byte values with the given generator, redrawn if they round to zero
template <typename T, typename F> T nonzero(F f) {
    for (;;) {
        T t = conv<T>(f());
        if (to_float(t) != 0.0f) return t;
    }
}

struct Data {
    std::vector<float> w, m, v;
    AdamWStep s;
};

enum Kind { RANDOM, EDGE, SPECIAL };

Data make_data(size_t n, Kind kind, uint64_t seed) {
    Gen g(seed);
    Data d;
    d.w.resize(n), d.m.resize(n), d.v.resize(n);
    for (size_t i = 0; i < n; i++) {
        d.w[i] = (kind == RANDOM && (i % 3)) ? g.wide(-30, 20) : g.edge();
        d.m[i] = g.wide(-40, 10);
        d.v[i] = std::fabs(g.wide(-80, 20));
        if (kind == SPECIAL && g.u32() % 8 == 0) {  // inf / NaN inputs here and there
            const float specials[] = {INFINITY, -INFINITY, NAN, -NAN};
            float x = specials[g.u32() % 4];
            switch (g.u32() % 3) {
                case 0: d.w[i] = x; break;
                case 1: d.m[i] = x; break;
                default: d.v[i] = std::fabs(x); break;
            }
        }
    }
    d.s.lr = kind == EDGE ? 0.0f : (float)std::ldexp(1.0 + g.uni(), -12);  // EDGE: the copy rounds w itself
    d.s.beta1 = 0.9f;
    d.s.beta2 = 0.95f;
    d.s.eps = 1e-8f;
    d.s.weight_decay = (g.u32() & 1) ? 0.1f : 0.0f;
    d.s.grad_scale = (float)(0.5 + g.uni()) / 1024.0f;
    d.s.bias_correction1 = 1.0f - std::pow(0.9f, 7.0f);
    d.s.bias_correction2 = 1.0f - std::pow(0.95f, 7.0f);
    d.s.rounding_seed = g.r();
    return d;
}

template <typename Tg> std::vector<Tg> make_grad(size_t n, Kind kind, uint64_t seed) {
    Gen g(seed ^ 0x5eed);
    std::vector<Tg> out(n);
    for (size_t i = 0; i < n; i++) {
        if (kind == SPECIAL && g.u32() % 16 == 0) {
            out[i] = conv<Tg>((g.u32() & 1) ? INFINITY : NAN);
            continue;
        }
        // fp16 gradients stay within its range (the loss scale keeps them there)
        out[i] = std::is_same<Tg, f16>::value ? nonzero<Tg>([&] { return g.wide(-24, 15); })
                                              : nonzero<Tg>([&] { return g.wide(-60, 40); });
    }
    return out;
}

// ---------------------------------------------------------------------------
// Comparison

bool same(float a, float b) { return float_bits(a) == float_bits(b) || (std::isnan(a) && std::isnan(b)); }
bool same(bf16 a, bf16 b) { return a.bits == b.bits || (std::isnan(to_float(a)) && std::isnan(to_float(b))); }
bool same(f16 a, f16 b) { return a.bits == b.bits || (std::isnan(to_float(a)) && std::isnan(to_float(b))); }
uint32_t raw(float x) { return float_bits(x); }
uint32_t raw(bf16 x) { return x.bits; }
uint32_t raw(f16 x) { return x.bits; }

// Reports the first few mismatches of one array; returns their count.
template <typename T>
size_t compare(const char* what, const std::string& ctx, const T* got, const T* want, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (!same(got[i], want[i])) {
            if (bad < 3)
                fprintf(stderr, "  %s: %s[%zu] = %g (0x%08x), want %g (0x%08x)\n", ctx.c_str(), what, i,
                        (double)to_float(got[i]), raw(got[i]), (double)to_float(want[i]), raw(want[i]));
            bad++;
        }
    }
    return bad;
}

// The fused model: the documented operation order, written out independently.
template <typename Tg, typename Tp>
void model_fused(float* w, float* m, float* v, const Tg* g, Tp* p, size_t n, const AdamWStep& s, size_t off) {
    for (size_t i = 0; i < n; i++) {
        float gi = to_float(g[i]) * s.grad_scale;
        m[i] = std::fma(s.beta1, m[i], (1.0f - s.beta1) * gi);
        v[i] = std::fma(s.beta2, v[i], ((1.0f - s.beta2) * gi) * gi);
        float t = (m[i] / s.bias_correction1) / (std::sqrt(v[i] / s.bias_correction2) + s.eps);
        w[i] = std::fma(-s.lr, std::fma(s.weight_decay, w[i], t), w[i]);
        if (p) p[i] = round_param<Tp>(w[i], s.rounding_seed, off + i);
    }
}

// Non-fused builds only: adamw_cpu (4 extra roundings) against the fused
// result, within a bound built from the sizes of the terms whose roundings
// differ; returns the largest error / bound seen (> 1 fails).
double unfused_bound_check(const Data& d, const std::vector<float>& g, const float* wr, const float* mr,
                           const float* vr, const float* wf, const float* mf, const float* vf) {
    const double u = std::ldexp(1.0, -24);
    const AdamWStep& s = d.s;
    double worst = 0;
    for (size_t i = 0; i < d.w.size(); i++) {
        if (!std::isfinite(wf[i]) || !std::isfinite(mf[i]) || !std::isfinite(vf[i])) continue;
        const double gi = (double)g[i];
        const double tm = std::fabs(s.beta1 * (double)d.m[i]) + std::fabs((1.0 - s.beta1) * gi);
        const double tv = s.beta2 * (double)d.v[i] + (1.0 - s.beta2) * gi * gi;
        const double bm = 4 * u * tm + 4e-45, bv = 4 * u * tv + 4e-45;
        const double vhat = vf[i] / s.bias_correction2, den = std::sqrt(vhat) + s.eps;
        const double t = std::fabs(mf[i] / s.bias_correction1 / den);
        const double dt = bm / s.bias_correction1 / den + t * (bv / s.bias_correction2 / (2 * den * std::sqrt(vhat) + 1e-300)) +
                          8 * u * t;
        const double uw = std::fabs(s.weight_decay * (double)d.w[i]) + t;
        // two roundings of nearby values differ by at most their distance plus one ulp
        const float wmax = std::max(std::fabs(wf[i]), std::fabs(wr[i]));
        const double ulp = std::ldexp(1.0, std::max(std::ilogb(wmax), -126) - 23);
        const double bw = 2 * ulp + 2 * s.lr * (dt + 8 * u * uw);
        worst = std::max(worst, std::fabs((double)mr[i] - mf[i]) / bm);
        worst = std::max(worst, std::fabs((double)vr[i] - vf[i]) / bv);
        worst = std::max(worst, std::fabs((double)wr[i] - wf[i]) / bw);
    }
    return worst;
}

// ---------------------------------------------------------------------------
// One configuration: (Tg, Tp, n, full_offset, data kind) through every path and
// thread count.

struct Pools {
    std::vector<std::unique_ptr<CpuAdamW>> by_threads;  // thread counts 1, 2, 3, 8
    std::vector<CpuIsa> isas;
};

double g_worst_unfused = 0;

template <typename Tg, typename Tp>
void check_config(Pools& pools, size_t n, size_t off, Kind kind, bool with_param, uint64_t seed) {
    Data d = make_data(n, kind, seed);
    std::vector<Tg> grad = make_grad<Tg>(n, kind, seed);

    // the expectation
    std::vector<float> wr = d.w, mr = d.m, vr = d.v;
    std::vector<Tp> pr(n);
    adamw_cpu<Tg, Tp>(wr.data(), mr.data(), vr.data(), grad.data(), with_param ? pr.data() : nullptr, n, d.s, off);
    std::vector<float> we = wr, me = mr, ve = vr;
    std::vector<Tp> pe = pr;
    if (!REF_FUSED) {
        we = d.w, me = d.m, ve = d.v;
        model_fused<Tg, Tp>(we.data(), me.data(), ve.data(), grad.data(), with_param ? pe.data() : nullptr, n, d.s, off);
        std::vector<float> gf(n);
        for (size_t i = 0; i < n; i++) gf[i] = to_float(grad[i]) * d.s.grad_scale;
        g_worst_unfused = std::max(g_worst_unfused, unfused_bound_check(d, gf, wr.data(), mr.data(), vr.data(),
                                                                        we.data(), me.data(), ve.data()));
    }

    // misaligned by `shift` elements on some runs: the streaming-store prologue and unaligned loads
    const size_t pad = 5;
    std::vector<float> w(n + pad), m(n + pad), v(n + pad);
    std::vector<Tp> p(n + pad);
    std::vector<Tg> gcopy(n + pad);
    int run = 0;
    for (CpuIsa isa : pools.isas) {
        for (auto& pool : pools.by_threads) {
            const size_t shift = (size_t)(run % 3 == 2 ? 3 : run % 3);  // 0, 1, 3
            const bool nt = run % 2 == 0;
            run++;
            pool->force_isa(isa);
            pool->set_streaming_threshold(nt ? 0 : SIZE_MAX);
            std::fill(w.begin(), w.end(), 0.0f);
            std::copy(d.w.begin(), d.w.end(), w.begin() + shift);
            std::copy(d.m.begin(), d.m.end(), m.begin() + shift);
            std::copy(d.v.begin(), d.v.end(), v.begin() + shift);
            std::copy(grad.begin(), grad.end(), gcopy.begin() + shift);
            std::fill(p.begin(), p.end(), conv<Tp>(12345.0f));
            if (with_param)
                pool->step(w.data() + shift, m.data() + shift, v.data() + shift, gcopy.data() + shift,
                           p.data() + shift, n, d.s, off);
            else
                pool->step(w.data() + shift, m.data() + shift, v.data() + shift, gcopy.data() + shift, nullptr, n,
                           d.s, off);
            char ctx[256];
            snprintf(ctx, sizeof(ctx), "Tg=%s Tp=%s%s n=%zu off=0x%zx kind=%d isa=%s threads=%d shift=%zu nt=%d",
                     tname<Tg>(), tname<Tp>(), with_param ? "" : "(none)", n, off, (int)kind, pool->isa(),
                     pool->num_threads(), shift, (int)nt);
            size_t bad = compare("master", ctx, w.data() + shift, we.data(), n) +
                         compare("m", ctx, m.data() + shift, me.data(), n) +
                         compare("v", ctx, v.data() + shift, ve.data(), n);
            if (with_param) bad += compare("param", ctx, p.data() + shift, pe.data(), n);
            // nothing written outside the piece
            for (size_t i = 0; i < shift; i++) bad += !same(p[i], conv<Tp>(12345.0f)) || w[i] != 0.0f;
            for (size_t i = shift + n; i < n + pad; i++) bad += !same(p[i], conv<Tp>(12345.0f)) || w[i] != 0.0f;
            EXPECT(bad == 0, "%s: %zu mismatches", ctx, bad);
        }
    }
}

template <typename Tg, typename Tp>
void check_pair(Pools& pools, const std::vector<size_t>& lengths, const std::vector<size_t>& offsets, uint64_t seed) {
    for (size_t n : lengths)
        for (size_t off : offsets)
            for (Kind kind : {RANDOM, EDGE}) check_config<Tg, Tp>(pools, n, off, kind, true, seed++ * 7919 + n);
    check_config<Tg, Tp>(pools, 1000, 5, SPECIAL, true, seed + 1);
    check_config<Tg, Tp>(pools, 100003, 0, RANDOM, false, seed + 2);
}

// ---------------------------------------------------------------------------
// Building blocks on their own

// fp16: every float whose exponent field is in the delicate ranges, both signs;
// for the other exponents, every top-10-bit mantissa with edge patterns below.
void check_f16_conversion(CpuIsa isa) {
    auto conv = [isa](const float* x, uint16_t* out, size_t n) { cpu_adamw_detail::vector_to_f16(isa, x, out, n); };
    const size_t B = 1 << 16;
    std::vector<float> x(B);
    std::vector<uint16_t> got(B);
    size_t bad = 0, total = 0;
    auto run_block = [&](size_t cnt) {
        conv(x.data(), got.data(), cnt);
        for (size_t i = 0; i < cnt; i++) {
            uint16_t want = float_to_half_bits(x[i]);
            if (got[i] != want) {
                if (bad < 5)
                    fprintf(stderr, "  f16 %s: 0x%08x -> 0x%04x, want 0x%04x\n", cpu_isa_name(isa), float_bits(x[i]),
                            got[i], want);
                bad++;
            }
        }
        total += cnt;
    };
    std::vector<uint32_t> full_exps;
    for (uint32_t e = 0x64; e <= 0x72; e++) full_exps.push_back(e);  // 2^-27 .. 2^-13: subnormal halves and the edge
    for (uint32_t e = 0x8d; e <= 0x90; e++) full_exps.push_back(e);  // 2^14 .. 2^17: the overflow edge
    full_exps.push_back(0xff);                                       // inf and every NaN
    full_exps.push_back(0x00);                                       // fp32 subnormals
    for (uint32_t sign : {0u, 1u})
        for (uint32_t e : full_exps)
            for (uint32_t man0 = 0; man0 < (1u << 23); man0 += B) {
                for (size_t i = 0; i < B; i++) x[i] = bits_float(sign << 31 | e << 23 | (man0 + (uint32_t)i));
                run_block(B);
            }
    const uint32_t lows[] = {0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x1fff, 0x0800, 0x17ff};
    size_t k = 0;
    for (uint32_t hi = 0; hi < (1u << 19); hi++)  // sign, exponent, top 10 mantissa bits
        for (uint32_t lo : lows) {
            x[k++] = bits_float(hi << 13 | lo);
            if (k == B) run_block(k), k = 0;
        }
    if (k) run_block(k - k % 16);
    EXPECT(bad == 0, "fp16 conversion (%s): %zu of %zu differ from float_to_half_bits", cpu_isa_name(isa), bad, total);
}

void check_bf16_rounding(CpuIsa isa) {
    auto conv = [isa](const float* x, const uint32_t* rnd, uint16_t* out, size_t n) {
        cpu_adamw_detail::vector_bf16_stochastic(isa, x, rnd, out, n);
    };
    const size_t N = 1 << 20;
    Gen g(99);
    std::vector<float> x(N);
    std::vector<uint32_t> rnd(N);
    std::vector<uint16_t> got(N);
    for (size_t i = 0; i < N; i++) {
        uint32_t b;
        switch (i % 6) {
            case 0: b = g.u32(); break;                                       // anything, NaN and inf included
            case 1: b = (g.u32() & 0x807f0000u) | 0x7f800000u | (g.u32() & 0xffffu); break;  // inf/NaN exponent
            case 2: b = (g.u32() & 0x80000000u) | 0x7f7f0000u | (g.u32() & 0xffffu); break;  // near FLT_MAX
            case 3: b = (g.u32() & 0xffff0000u) | 0xffffu; break;             // always carries unless r = 0
            case 4: b = (g.u32() & 0xffff0000u); break;                       // exact
            default: b = float_bits(g.edge()); break;
        }
        x[i] = bits_float(b);
        rnd[i] = (i % 5 == 0) ? 0xffffffffu : (i % 5 == 1) ? 0u : g.u32();
    }
    conv(x.data(), rnd.data(), got.data(), N);
    size_t bad = 0;
    for (size_t i = 0; i < N; i++) {
        uint16_t want = bf16_from_float_stochastic(x[i], rnd[i]).bits;
        if (got[i] != want) {
            if (bad < 5)
                fprintf(stderr, "  bf16 %s: 0x%08x r=0x%08x -> 0x%04x, want 0x%04x\n", cpu_isa_name(isa),
                        float_bits(x[i]), rnd[i], got[i], want);
            bad++;
        }
    }
    EXPECT(bad == 0, "bf16 stochastic rounding (%s): %zu of %zu differ", cpu_isa_name(isa), bad, N);
}

void check_rounding_bits(CpuIsa isa) {
    const int W = isa == CpuIsa::AVX512 ? 16 : 8;
    const uint64_t seeds[] = {0, 1, 0xdeadbeefcafef00dull, 0xffffffffffffffffull};
    const uint64_t bases[] = {0, 12345, (1ull << 32) - 40, (1ull << 33) - 40, 0x7ffffffffull - 40, ~0ull - 100};
    size_t bad = 0;
    for (uint64_t seed : seeds)
        for (uint64_t base : bases)
            for (uint64_t idx = base; idx < base + 64; idx++) {
                uint32_t out[16];
                cpu_adamw_detail::vector_rounding_bits(isa, seed, idx, out);
                for (int j = 0; j < W; j++) bad += out[j] != rounding_bits(seed, idx + (uint64_t)j);
            }
    EXPECT(bad == 0, "vector rounding bits (%s): %zu lanes differ from rounding_bits", cpu_isa_name(isa), bad);
}

}  // namespace

int main() {
    printf("test_cpu_adamw: reference comparison %s\n",
           REF_FUSED ? "bit-identical (adamw_cpu compiled with FMA contraction)"
                     : "by bound (adamw_cpu compiled without FMA contraction; CpuAdamW bit-identical to the fused model)");
    Pools pools;
    for (CpuIsa isa : {CpuIsa::Scalar, CpuIsa::AVX2, CpuIsa::AVX512})
        if (CpuAdamW::isa_supported(isa)) pools.isas.push_back(isa);
    printf("code paths on this CPU:");
    for (CpuIsa isa : pools.isas) printf(" %s", cpu_isa_name(isa));
    printf(" (auto: %s)\n", cpu_isa_name(CpuAdamW::best_isa()));
    EXPECT(!pools.isas.empty() && pools.isas[0] == CpuIsa::Scalar, "the scalar path is always available");
    {
        CpuAdamW def(2);
        EXPECT(def.isa_id() == CpuAdamW::best_isa(), "the default path is the best available");
        EXPECT(std::string(def.isa()) == cpu_isa_name(CpuAdamW::best_isa()), "isa() names it");
        EXPECT((int)def.cores().size() == 2, "one core per participant");
    }
    for (int t : {1, 2, 3, 8}) {
        pools.by_threads.emplace_back(new CpuAdamW(t));
        pools.by_threads.back()->set_min_per_thread(1);  // split even tiny pieces: every chunk edge is exercised
    }

    for (CpuIsa isa : pools.isas) {
        if (isa == CpuIsa::Scalar) continue;
        check_f16_conversion(isa);
        check_bf16_rounding(isa);
        check_rounding_bits(isa);
    }

    const std::vector<size_t> lengths = {0, 1, 7, 15, 16, 17, 63, 1000, 100003};
    const std::vector<size_t> offsets = {0, 1000003, (1ull << 32) - 37, (1ull << 33) + 5};
    check_pair<float, float>(pools, lengths, offsets, 1);
    check_pair<bf16, bf16>(pools, lengths, offsets, 2);
    check_pair<f16, f16>(pools, lengths, offsets, 3);
    check_pair<float, bf16>(pools, lengths, offsets, 4);
    check_pair<float, f16>(pools, lengths, offsets, 5);
    check_pair<bf16, float>(pools, lengths, offsets, 6);
    check_pair<bf16, f16>(pools, lengths, offsets, 7);
    check_pair<f16, float>(pools, lengths, offsets, 8);
    check_pair<f16, bf16>(pools, lengths, offsets, 9);

    // big pieces whose indices cross 2^32 in the middle of a thread's chunk
    const size_t big = 3000017;
    check_config<bf16, bf16>(pools, big, (1ull << 32) - big / 3, RANDOM, true, 101);
    check_config<float, float>(pools, big, (5ull << 32) - 1000, RANDOM, true, 102);
    check_config<f16, f16>(pools, big, 77, EDGE, true, 103);
    check_config<float, bf16>(pools, big, (1ull << 40) - big / 2, EDGE, true, 104);

    // the default thresholds (small calls on the caller only, streaming stores for big ones)
    {
        CpuAdamW dflt(3);
        for (size_t n : {(size_t)3000, (size_t)40000, (size_t)1 << 20 | 5}) {
            Data d = make_data(n, RANDOM, n);
            std::vector<bf16> grad = make_grad<bf16>(n, RANDOM, n);
            std::vector<float> wr = d.w, mr = d.m, vr = d.v, w = d.w, m = d.m, v = d.v;
            std::vector<bf16> pr(n), p(n);
            adamw_cpu<bf16, bf16>(wr.data(), mr.data(), vr.data(), grad.data(), pr.data(), n, d.s, 42);
            if (!REF_FUSED) {
                wr = d.w, mr = d.m, vr = d.v;
                model_fused<bf16, bf16>(wr.data(), mr.data(), vr.data(), grad.data(), pr.data(), n, d.s, 42);
            }
            // several calls in a row: the pool is reused (and may have gone to sleep in between)
            for (int rep = 0; rep < 3; rep++) {
                w = d.w, m = d.m, v = d.v;
                dflt.step(w.data(), m.data(), v.data(), grad.data(), p.data(), n, d.s, 42);
            }
            std::string ctx = "default thresholds n=" + std::to_string(n);
            size_t bad = compare("master", ctx, w.data(), wr.data(), n) + compare("m", ctx, m.data(), mr.data(), n) +
                         compare("v", ctx, v.data(), vr.data(), n) + compare("param", ctx, p.data(), pr.data(), n);
            EXPECT(bad == 0, "%s: %zu mismatches", ctx.c_str(), bad);
        }
    }

    if (!REF_FUSED) {
        printf("adamw_cpu without contraction: largest error / bound = %.3g\n", g_worst_unfused);
        EXPECT(g_worst_unfused <= 1.0, "adamw_cpu within the derived bound of the fused result (%.3g)", g_worst_unfused);
    }
    return test_summary("test_cpu_adamw");
}
