// Tests for kernels/cpu/gemm.h: results against a double-precision triple loop,
// rounding of 2-byte outputs exactly once, beta == 0 not reading C, submatrix
// views (leading dimensions larger than the logical width), and bit-identical
// results for any OpenMP thread count, including concurrent callers.
//
// Tolerances. Inputs are stored in their type, and the reference uses exactly the
// widened stored values, so the only error is the fp32 arithmetic (and the final
// rounding to a 2-byte C). A K-term fp32 dot product accumulated in order has a
// worst-case error of about K*u*sum|a||b| (u = 2^-24); with random signs the
// rounding errors behave like a random walk, ~u*sqrt(K)*sum|a||b|. We allow
// u*(2*sqrt(K)+4)*sum|a*b| (+ the same for alpha/beta scaling, folded into the
// "sum of magnitudes" below), which is ~17x tighter than 1e-6*sqrt(K) and still
// catches any fp16/bf16-precision step (2^-8 or 2^-11 relative) by orders of
// magnitude. For a 2-byte C we require the result to be within 1 ulp of TC of the
// correctly rounded exact result: rounding partial sums to TC would be many ulps off.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>

#include "kernels/cpu/gemm.h"
#include "test/test_util.h"

namespace {

// ---------------------------------------------------------------------------
// Deterministic random numbers: splitmix64.
struct Rng {
    uint64_t s;
    explicit Rng(uint64_t seed) : s(seed) {}
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    // uniform in [-1, -0.05] U [0.05, 1]: never zero, both signs
    float value() {
        float mag = 0.05f + 0.95f * (float)((next() >> 40) * (1.0 / 16777216.0));
        return (next() & 1) ? -mag : mag;
    }
};

template <typename T> const char* tname() { return dtype_name(dtype_of<T>::value); }

// A row-major matrix of `rows` x `cols` stored with leading dimension ld >= cols.
// Padding (columns cols..ld-1) is filled with a sentinel so that reads of it
// would be visible and writes to it can be detected.
template <typename T> struct Mat {
    int rows = 0, cols = 0, ld = 0;
    std::vector<T> v;
    Mat(int r, int c, int ld_, Rng& rng) : rows(r), cols(c), ld(ld_) {
        v.resize((size_t)std::max(r, 1) * std::max(ld_, 1));
        for (size_t i = 0; i < v.size(); ++i) v[i] = from_float<T>(rng.value());
        for (int i = 0; i < r; ++i)
            for (int j = cols; j < ld; ++j) v[(size_t)i * ld + j] = from_float<T>(1e4f);  // sentinel
    }
    float at(int i, int j) const { return to_float(v[(size_t)i * ld + j]); }
    T* data() { return v.data(); }
};

bool bits_equal(const void* a, const void* b, size_t n) { return std::memcmp(a, b, n) == 0; }

// Ordered integer of a 2-byte float's bits, so that adjacent values differ by 1.
int ordered16(uint16_t b) { return (b & 0x8000) ? -(int)(b & 0x7fff) : (int)b; }
uint16_t bits16(bf16 x) { return x.bits; }
uint16_t bits16(f16 x) { return x.bits; }

constexpr double U32 = 1.0 / 16777216.0;  // fp32 unit roundoff, 2^-24

struct CaseResult {
    double worst_ratio = 0;  // max |err| / allowed
    long long bad = 0;
    long long nan = 0;
    bool pad_ok = true;
};

// Runs one GEMM and checks every element against the double reference.
template <typename TA, typename TB, typename TC>
CaseResult run_case(bool tA, bool tB, int M, int N, int K, float alpha, float beta, int padA, int padB,
                    int padC, uint64_t seed) {
    Rng rng(seed);
    // Stored shapes: A is M x K (or K x M if tA), B is K x N (or N x K if tB).
    const int ar = tA ? K : M, ac = tA ? M : K;
    const int br = tB ? N : K, bc = tB ? K : N;
    Mat<TA> A(ar, ac, ac + padA, rng);
    Mat<TB> B(br, bc, bc + padB, rng);
    Mat<TC> C(M, N, N + padC, rng);
    if (beta == 0.0f) {  // beta == 0: C must not be read; poison it
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) C.v[(size_t)i * C.ld + j] = from_float<TC>(NAN);
    }
    Mat<TC> C0 = C;
    gemm_cpu<TA, TB, TC>(tA, tB, M, N, K, alpha, A.data(), A.ld, B.data(), B.ld, beta, C.data(), C.ld);

    CaseResult res;
    for (int i = 0; i < M; ++i) {
        for (int j = 0; j < N; ++j) {
            double s = 0, sa = 0;
            for (int k = 0; k < K; ++k) {
                double a = tA ? A.at(k, i) : A.at(i, k);
                double b = tB ? B.at(j, k) : B.at(k, j);
                s += a * b;
                sa += std::fabs(a * b);
            }
            double ref = (double)alpha * s, mag = std::fabs((double)alpha) * sa;
            if (beta != 0.0f) {
                ref += (double)beta * C0.at(i, j);
                mag += std::fabs((double)beta * C0.at(i, j));
            }
            // fp32 arithmetic error budget (see the top of the file); +2 roundings for alpha, beta.
            const double tol32 = U32 * (2.0 * std::sqrt((double)K) + 4.0) * mag;
            const TC got_t = C.v[(size_t)i * C.ld + j];
            const double got = to_float(got_t);
            if (std::isnan(got)) {
                ++res.nan;
                ++res.bad;
                continue;
            }
            const double err = std::fabs(got - ref);
            bool ok;
            double ratio;
            if constexpr (std::is_same<TC, float>::value) {
                ok = err <= tol32;
                ratio = tol32 > 0 ? err / tol32 : (err == 0 ? 0 : 1e30);
            } else {
                // Within 1 ulp of TC of the correctly rounded result, or (near zero,
                // where cancellation dominates) within the fp32 budget.
                const int d = std::abs(ordered16(bits16(got_t)) - ordered16(bits16(from_float<TC>((float)ref))));
                ok = d <= 1 || err <= tol32;
                ratio = d <= 1 ? d * 0.5 : (tol32 > 0 ? err / tol32 : 1e30);
            }
            if (!ok) ++res.bad;
            res.worst_ratio = std::max(res.worst_ratio, ratio);
        }
        for (int j = N; j < C.ld; ++j)  // padding columns of C untouched
            if (!bits_equal(&C.v[(size_t)i * C.ld + j], &C0.v[(size_t)i * C.ld + j], sizeof(TC))) res.pad_ok = false;
    }
    return res;
}

struct Shape {
    int M, N, K;
};

// All four transpose combinations over many shapes (odd, prime, 0/1, multiples of
// the blocking and one past them, several K blocks), with varying alpha/beta and
// submatrix leading dimensions.
template <typename TA, typename TB, typename TC> void test_accuracy(const std::vector<Shape>& shapes) {
    const float ab[][2] = {{1.0f, 0.0f}, {0.5f, 1.0f}, {-1.5f, 0.25f}, {2.0f, -1.0f}, {1.0f, 1.0f}};
    double worst = 0;
    int cases = 0;
    uint64_t seed = 1;
    for (const Shape& s : shapes) {
        for (int t = 0; t < 4; ++t) {
            const bool tA = t & 1, tB = t & 2;
            const int v = (int)(seed % 5);
            const int pad = (seed % 3 == 0) ? 0 : (int)(seed % 7) + 1;  // mix of tight and padded views
            CaseResult r = run_case<TA, TB, TC>(tA, tB, s.M, s.N, s.K, ab[v][0], ab[v][1], pad, pad + 2,
                                                pad + 1, seed * 7919);
            EXPECT(r.bad == 0 && r.pad_ok, "%s,%s->%s tA=%d tB=%d M=%d N=%d K=%d alpha=%g beta=%g pad=%d: %lld bad (%lld NaN), worst %.3g of tolerance, pad %s",
                   tname<TA>(), tname<TB>(), tname<TC>(), tA, tB, s.M, s.N, s.K, ab[v][0], ab[v][1], pad, r.bad,
                   r.nan, r.worst_ratio, r.pad_ok ? "ok" : "CLOBBERED");
            worst = std::max(worst, r.worst_ratio);
            ++cases;
            ++seed;
        }
    }
    printf("  %s,%s->%s: %d cases, worst error %.3f of tolerance\n", tname<TA>(), tname<TB>(), tname<TC>(), cases,
           worst);
}

// K == 0 and alpha == 0: C = beta*C, A and B not read (null pointers are passed).
template <typename TC> void test_degenerate() {
    Rng rng(99);
    for (float beta : {0.0f, 1.0f, -0.5f}) {
        for (int K : {0, 5}) {
            const float alpha = K == 0 ? 1.0f : 0.0f;
            Mat<TC> C(7, 9, 11, rng);
            if (beta == 0.0f)
                for (auto& x : C.v) x = from_float<TC>(NAN);
            Mat<TC> C0 = C;
            gemm_cpu<float, float, TC>(false, true, 7, 9, K, alpha, nullptr, 5, nullptr, 5, beta, C.data(), C.ld);
            bool ok = true;
            for (int i = 0; i < 7; ++i)
                for (int j = 0; j < C.ld; ++j) {
                    const float want = j < 9 ? (beta == 0.0f ? 0.0f : to_float(from_float<TC>(beta * C0.at(i, j))))
                                             : C0.at(i, j);
                    const float got = C.at(i, j);
                    if (!(got == want || (j >= 9 && std::isnan(want) && std::isnan(got)))) ok = false;
                }
            EXPECT(ok, "%s K=%d alpha=%g beta=%g: C != beta*C", tname<TC>(), K, alpha, beta);
        }
    }
    // M == 0 or N == 0: nothing is touched (null C is fine).
    gemm_cpu<float, float, TC>(false, false, 0, 5, 3, 1.0f, nullptr, 3, nullptr, 5, 0.0f, nullptr, 5);
    gemm_cpu<float, float, TC>(false, false, 5, 0, 3, 1.0f, nullptr, 3, nullptr, 1, 0.0f, nullptr, 1);
    EXPECT(true, "empty shapes");
}

// Big enough to use several threads, several K blocks, several N panels and
// (for 2-byte C) several scratch row blocks; the result must be bit-identical
// for 1, 2, 3 and 5 threads. One shape is also checked against the reference
// on a sample of rows.
template <typename TA, typename TB, typename TC>
void test_thread_invariance(bool tA, bool tB, int M, int N, int K, float alpha, float beta, bool check_ref) {
    Rng rng(1234 + M + N + K);
    const int ar = tA ? K : M, ac = tA ? M : K;
    const int br = tB ? N : K, bc = tB ? K : N;
    Mat<TA> A(ar, ac, ac + 3, rng);
    Mat<TB> B(br, bc, bc + 1, rng);
    Mat<TC> Cinit(M, N, N + 5, rng);
    std::vector<TC> first;
    bool all_same = true;
    for (int nt : {1, 2, 3, 5}) {
        omp_set_num_threads(nt);
        Mat<TC> C = Cinit;
        gemm_cpu<TA, TB, TC>(tA, tB, M, N, K, alpha, A.data(), A.ld, B.data(), B.ld, beta, C.data(), C.ld);
        if (nt == 1) {
            first = C.v;
        } else if (!bits_equal(first.data(), C.v.data(), first.size() * sizeof(TC))) {
            all_same = false;
            size_t n_diff = 0;
            for (size_t i = 0; i < first.size(); ++i) n_diff += !bits_equal(&first[i], &C.v[i], sizeof(TC));
            fprintf(stderr, "  %d threads: %zu elements differ from 1 thread\n", nt, n_diff);
        }
    }
    omp_set_num_threads(2);
    EXPECT(all_same, "%s,%s->%s tA=%d tB=%d %dx%dx%d: results depend on the thread count", tname<TA>(), tname<TB>(),
           tname<TC>(), tA, tB, M, N, K);
    if (check_ref) {
        // Sampled reference check (every 37th row) so that large shapes stay cheap.
        long long bad = 0;
        for (int i = 0; i < M; i += 37)
            for (int j = 0; j < N; ++j) {
                double s = 0, sa = 0;
                for (int k = 0; k < K; ++k) {
                    double a = tA ? A.at(k, i) : A.at(i, k);
                    double b = tB ? B.at(j, k) : B.at(k, j);
                    s += a * b;
                    sa += std::fabs(a * b);
                }
                const double c0 = to_float(Cinit.v[(size_t)i * Cinit.ld + j]);
                const double ref = alpha * s + (beta != 0 ? beta * c0 : 0);
                const double mag = std::fabs(alpha) * sa + std::fabs(beta * c0);
                const double tol32 = U32 * (2.0 * std::sqrt((double)K) + 4.0) * mag;
                const TC g = first[(size_t)i * Cinit.ld + j];
                const double err = std::fabs(to_float(g) - ref);
                bool ok;
                if constexpr (std::is_same<TC, float>::value) {
                    ok = err <= tol32;
                } else {
                    const int d = std::abs(ordered16(bits16(g)) - ordered16(bits16(from_float<TC>((float)ref))));
                    ok = d <= 1 || err <= tol32;
                }
                bad += !ok;
            }
        EXPECT(bad == 0, "%s,%s->%s tA=%d tB=%d %dx%dx%d: %lld sampled elements out of tolerance", tname<TA>(),
               tname<TB>(), tname<TC>(), tA, tB, M, N, K, bad);
    }
}

// Several std::threads calling gemm_cpu at once, each with its own OpenMP team
// size (as the emulated ranks do), must each get the single-threaded result.
void test_concurrent_callers() {
    const int M = 301, N = 517, K = 611;
    Rng rng(77);
    Mat<bf16> A(M, K, K, rng);
    Mat<bf16> B(N, K, K, rng);
    std::vector<bf16> ref((size_t)M * N);
    omp_set_num_threads(1);
    gemm_cpu<bf16, bf16, bf16>(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, ref.data(), N);
    omp_set_num_threads(2);

    const int ncallers = 3;
    std::vector<std::vector<bf16>> out(ncallers, std::vector<bf16>((size_t)M * N));
    std::vector<std::thread> th;
    for (int c = 0; c < ncallers; ++c)
        th.emplace_back([&, c] {
            omp_set_num_threads(c + 1);  // this thread's own setting
            for (int rep = 0; rep < 3; ++rep)
                gemm_cpu<bf16, bf16, bf16>(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f,
                                           out[c].data(), N);
        });
    for (auto& t : th) t.join();
    for (int c = 0; c < ncallers; ++c)
        EXPECT(bits_equal(out[c].data(), ref.data(), ref.size() * sizeof(bf16)),
               "concurrent caller %d (%d threads) differs from the serial result", c, c + 1);
}

// With K = 1, alpha = 1, B = 1 the product is exact, so C must equal
// from_float<TC>(a) bit for bit: checks the (vectorised) narrowing of full and edge
// tiles, including ties, overflow to inf, subnormals, zeros and NaN.
template <typename TC> void test_output_rounding() {
    const int M = 37, N = 50;  // several full 6x16 tiles plus edges
    Rng rng(31);
    std::vector<float> a(M);
    std::vector<float> b(N, 1.0f);
    std::vector<TC> c((size_t)M * N);
    long long bad = 0;
    for (int rep = 0; rep < 200; ++rep) {
        for (int i = 0; i < M; ++i) {
            uint32_t u = (uint32_t)rng.next();
            switch (rng.next() % 8) {
                case 0: u = (u & 0xffff0000u) | 0x8000u; break;      // bf16 tie
                case 1: u = (u & 0xffffe000u) | 0x1000u; break;      // f16 tie (normal range)
                case 2: u = (u & 0x807fffffu) | (113u << 23); break; // f16 subnormal range
                case 3: u = (u & 0x807fffffu) | (142u << 23); break; // near the f16 max
                case 4: u = (u & 0x807fffffu) | (254u << 23); break; // near the bf16 max
                case 5: u = (u & 0x80000000u); break;                // +-0
                default: u = (u & 0x807fffffu) | ((120u + (u >> 27)) << 23); break;
            }
            if (rep == 0 && i == 0) u = 0x7fc00001u;  // a NaN
            memcpy(&a[i], &u, 4);
        }
        // A is M x 1 (lda 1), B is 1 x N.
        gemm_cpu<float, float, TC>(false, false, M, N, 1, 1.0f, a.data(), 1, b.data(), N, 0.0f, c.data(), N);
        for (int i = 0; i < M; ++i)
            for (int j = 0; j < N; ++j) {
                const TC want = from_float<TC>(a[i]), got = c[(size_t)i * N + j];
                // (-0 becomes +0: the sum starts from +0, as in any GEMM.)
                const bool same = std::isnan(a[i])  ? std::isnan(to_float(got))
                                  : a[i] == 0.0f ? to_float(got) == 0.0f
                                                 : bits16(want) == bits16(got);
                bad += !same;
            }
    }
    EXPECT(bad == 0, "%s: %lld outputs not rounded like from_float<%s>", tname<TC>(), bad, tname<TC>());
}

// Called from inside an active OpenMP team (each member with its own output):
// gemm_cpu must not split its work over the caller's team, and each result must
// equal the standalone one.
void test_called_inside_team() {
    const int M = 150, N = 170, K = 300;
    Rng rng(5);
    Mat<float> A(M, K, K, rng);
    Mat<float> B(K, N, N, rng);
    std::vector<float> ref((size_t)M * N);
    gemm_cpu<float, float, float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, ref.data(), N);
    std::vector<std::vector<float>> out(3, std::vector<float>((size_t)M * N, NAN));
#pragma omp parallel num_threads(3)
    {
        const int t = omp_get_thread_num();
        gemm_cpu<float, float, float>(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, out[t].data(), N);
    }
    for (int t = 0; t < 3; ++t)
        EXPECT(bits_equal(out[t].data(), ref.data(), ref.size() * sizeof(float)),
               "call from team member %d differs from the standalone result", t);
}

}  // namespace

int main() {
    omp_set_num_threads(2);
    printf("gemm_cpu: %s micro-kernel\n", gemm_cpu_kernel());

    // Shapes: tiny and degenerate, odd and prime, exact multiples of MR=6/NR=16/
    // KC=256 and one past them, several K blocks, sizes that span several tiles.
    const std::vector<Shape> shapes = {
        {1, 1, 1},      {1, 1, 7},     {1, 17, 1},    {17, 1, 3},     {2, 3, 4},      {6, 16, 8},
        {7, 17, 9},     {5, 15, 255},  {6, 16, 256},  {13, 29, 257},  {31, 47, 513},  {64, 64, 64},
        {97, 61, 129},  {12, 130, 31}, {150, 20, 19}, {145, 33, 300}, {1, 300, 700},  {300, 1, 700},
        {43, 50, 1031}, {200, 37, 45}, {61, 3, 777},  {3, 200, 50},
    };
    // Fewer shapes for the slower 2-byte-C paths (the reference loop dominates).
    const std::vector<Shape> shapes_small = {
        {1, 1, 1}, {2, 3, 4}, {7, 17, 9}, {6, 16, 256}, {13, 29, 257}, {31, 47, 600}, {97, 61, 129}, {150, 20, 19},
        {1, 300, 70}, {43, 50, 1031},
    };

    test_accuracy<float, float, float>(shapes);
    test_accuracy<bf16, bf16, bf16>(shapes);
    test_accuracy<f16, f16, f16>(shapes_small);
    test_accuracy<bf16, bf16, float>(shapes);
    test_accuracy<f16, f16, float>(shapes_small);
    test_accuracy<float, bf16, bf16>(shapes_small);
    test_accuracy<bf16, float, float>(shapes_small);
    test_accuracy<float, float, bf16>(shapes_small);

    test_output_rounding<bf16>();
    test_output_rounding<f16>();

    test_degenerate<float>();
    test_degenerate<bf16>();
    test_degenerate<f16>();

    // Thread invariance: transformer-like shapes; N > 3072 exercises several B
    // panels, K > 256 several K blocks, M > 336 several scratch row blocks for 2-byte C.
    test_thread_invariance<float, float, float>(false, true, 300, 3100, 300, 1.0f, 0.0f, true);  // forward
    test_thread_invariance<float, float, float>(false, false, 257, 129, 3100, 1.0f, 0.0f, true);  // dinp
    test_thread_invariance<float, float, float>(true, false, 520, 96, 700, 1.0f, 1.0f, true);    // dW += ...
    test_thread_invariance<float, float, float>(true, true, 71, 83, 97, -0.5f, 2.0f, true);
    test_thread_invariance<bf16, bf16, bf16>(false, true, 700, 3090, 520, 1.0f, 0.0f, true);
    test_thread_invariance<bf16, bf16, bf16>(false, false, 130, 200, 2000, 1.0f, 0.0f, true);
    test_thread_invariance<bf16, bf16, bf16>(true, false, 400, 64, 1000, 1.0f, 1.0f, true);
    test_thread_invariance<f16, f16, f16>(false, true, 333, 222, 600, 1.0f, 0.5f, true);
    test_thread_invariance<bf16, bf16, float>(false, true, 64, 640, 64, 1.0f, 0.0f, true);
    // N ~ 1000 with a long K: B is packed a few K blocks at a time (several groups).
    test_thread_invariance<float, float, float>(false, false, 200, 1000, 2000, 1.0f, 0.0f, true);
    test_thread_invariance<bf16, bf16, bf16>(false, true, 100, 1000, 1800, 1.0f, 1.0f, true);
    // Small shapes that stay single-threaded must agree too.
    test_thread_invariance<float, float, float>(false, false, 20, 30, 40, 1.0f, 0.0f, false);

    test_concurrent_callers();
    test_called_inside_team();

    return test_summary("gemm_cpu");
}
