// g++ -std=c++17 -O3 -march=native -fopenmp -I. dev/bench_gemm_cpu.cpp kernels/cpu/gemm.cpp -o build/bench_gemm_cpu
//
// Benchmark of kernels/cpu/gemm.h on the transformer's GEMM shapes (GPT-2 small,
// B*T = 1024), fp32 and bf16, with 1 and 2 OpenMP threads, plus a naive triple
// loop for one shape. The machine's FMA peak is measured with a register-only
// FMA loop so that the table can say what fraction of peak each shape reaches.
// Times are the best of several runs and rounds (the machine may be shared).
//   usage: build/bench_gemm_cpu [--quick] [--rounds N] [--only SUBSTRING]
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <omp.h>

#include "kernels/cpu/gemm.h"

// The FMA peak below needs AVX2/FMA in this file's own flags.
#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BENCH_AVX2 1
#endif

namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// Peak fp32 FMA throughput of one core: independent FMA chains, no memory traffic.
// Runs on every thread of the team at once, so with 2 threads it is the 2-core peak.
double measure_peak_gflops(int nthreads) {
#ifdef BENCH_AVX2
    const long iters = 50'000'000;
    double best = 0;
    for (int rep = 0; rep < 3; ++rep) {
        double t0 = now();
        float sink = 0;
#pragma omp parallel num_threads(nthreads) reduction(+ : sink)
        {
            // Ten independent chains (> FMA latency x throughput = 4 x 2) in registers.
            __m256 a0 = _mm256_set1_ps(1.000f), a1 = _mm256_set1_ps(1.001f), a2 = _mm256_set1_ps(1.002f);
            __m256 a3 = _mm256_set1_ps(1.003f), a4 = _mm256_set1_ps(1.004f), a5 = _mm256_set1_ps(1.005f);
            __m256 a6 = _mm256_set1_ps(1.006f), a7 = _mm256_set1_ps(1.007f), a8 = _mm256_set1_ps(1.008f);
            __m256 a9 = _mm256_set1_ps(1.009f);
            const __m256 m = _mm256_set1_ps(0.9999999f), c = _mm256_set1_ps(1e-7f);
            for (long it = 0; it < iters; ++it) {
                a0 = _mm256_fmadd_ps(a0, m, c); a1 = _mm256_fmadd_ps(a1, m, c);
                a2 = _mm256_fmadd_ps(a2, m, c); a3 = _mm256_fmadd_ps(a3, m, c);
                a4 = _mm256_fmadd_ps(a4, m, c); a5 = _mm256_fmadd_ps(a5, m, c);
                a6 = _mm256_fmadd_ps(a6, m, c); a7 = _mm256_fmadd_ps(a7, m, c);
                a8 = _mm256_fmadd_ps(a8, m, c); a9 = _mm256_fmadd_ps(a9, m, c);
            }
            __m256 s = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                     _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)));
            s = _mm256_add_ps(s, _mm256_add_ps(a8, a9));
            sink += _mm256_cvtss_f32(s);
        }
        double t = now() - t0;
        if (sink == 12345.f) printf(" ");
        best = std::max(best, 2.0 * 8 * 10 * iters * nthreads / t / 1e9);
    }
    return best;
#else
    (void)nthreads;
    return 0;
#endif
}

template <typename T> std::vector<T> random_vec(size_t n, uint32_t seed) {
    std::vector<T> v(n);
    uint32_t s = seed;
    for (auto& x : v) {
        s = s * 1664525u + 1013904223u;
        x = from_float<T>(((s >> 8) * (1.0f / 16777216.0f)) * 2.0f - 1.0f);
    }
    return v;
}

struct Shape {
    const char* name;
    bool tA, tB;
    int M, N, K;
    float beta;
};

// Best-of-several time for one GEMM.
template <typename T>
double time_gemm(const Shape& s, int nthreads, double min_seconds) {
    const size_t a_n = (size_t)s.M * s.K, b_n = (size_t)s.K * s.N, c_n = (size_t)s.M * s.N;
    std::vector<T> A = random_vec<T>(a_n, 1), B = random_vec<T>(b_n, 2), C = random_vec<T>(c_n, 3);
    const int lda = s.tA ? s.M : s.K, ldb = s.tB ? s.K : s.N, ldc = s.N;
    omp_set_num_threads(nthreads);
    auto run = [&] { gemm_cpu<T, T, T>(s.tA, s.tB, s.M, s.N, s.K, 1.0f, A.data(), lda, B.data(), ldb, s.beta, C.data(), ldc); };
    run();  // warm up (buffers, page faults, thread team)
    double best = 1e30, total = 0;
    int reps = 0;
    while (reps < 3 || total < min_seconds) {
        double t0 = now();
        run();
        double t = now() - t0;
        best = std::min(best, t);
        total += t;
        ++reps;
        if (reps >= 50) break;
    }
    return best;
}

// The naive reference: i, j, k loops with the k loop innermost (fp32 accumulation).
void naive_gemm_nt(int M, int N, int K, const float* A, const float* B, float* C) {
#pragma omp parallel for
    for (int i = 0; i < M; ++i)
        for (int j = 0; j < N; ++j) {
            float s = 0;
            for (int k = 0; k < K; ++k) s += A[(size_t)i * K + k] * B[(size_t)j * K + k];
            C[(size_t)i * N + j] = s;
        }
}

}  // namespace

int main(int argc, char** argv) {
    bool quick = false;
    int rounds = 3;
    const char* only = nullptr;  // run only shapes whose name contains this
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--quick")) quick = true, rounds = 1;
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = std::max(1, atoi(argv[++i]));
        if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    }
    const double min_s = quick ? 0.1 : 0.3;

    // GPT-2 small (C = 768) and the small model's LM head (C = 128), B*T = 1024.
    // Forward: out = inp @ W^T (transB); backward: dinp = dout @ W (NN); dW += dout^T @ inp (transA, beta = 1).
    std::vector<Shape> shapes = {
        {"square fwd   1024x768x768", false, true, 1024, 768, 768, 0.0f},
        {"square dinp  1024x768x768", false, false, 1024, 768, 768, 0.0f},
        {"square dW    768x768x1024", true, false, 768, 768, 1024, 1.0f},
        {"qkv fwd     1024x2304x768", false, true, 1024, 2304, 768, 0.0f},
        {"fc fwd      1024x3072x768", false, true, 1024, 3072, 768, 0.0f},
        {"proj fwd    1024x768x3072", false, true, 1024, 768, 3072, 0.0f},
        {"fc dW       3072x768x1024", true, false, 3072, 768, 1024, 1.0f},
        {"lmhead fwd 1024x50304x128", false, true, 1024, 50304, 128, 0.0f},
        {"lmhead dinp 1024x128x50304", false, false, 1024, 128, 50304, 0.0f},
        {"lmhead dW  50304x128x1024", true, false, 50304, 128, 1024, 1.0f},
        {"lmhead fwd 1024x50304x768", false, true, 1024, 50304, 768, 0.0f},
        {"small       64x64x64", false, true, 64, 64, 64, 0.0f},
        {"small       32x48x16", false, false, 32, 48, 16, 0.0f},
        {"small        7x9x5", true, false, 7, 9, 5, 0.0f},
    };
    std::vector<Shape> run_shapes;
    for (const Shape& s : shapes) {
        if (quick && 2.0 * s.M * s.N * s.K > 5e10) continue;
        if (only && !strstr(s.name, only)) continue;
        run_shapes.push_back(s);
    }

    // This machine may be shared, so everything is measured in several rounds
    // spread over time and the best of the rounds is kept (peak included).
    double peak1 = 0, peak2 = 0;
    std::vector<std::array<double, 4>> best(run_shapes.size(), {0, 0, 0, 0});
    for (int round = 0; round < rounds; ++round) {
        peak1 = std::max(peak1, measure_peak_gflops(1));
        peak2 = std::max(peak2, measure_peak_gflops(2));
        for (size_t si = 0; si < run_shapes.size(); ++si) {
            const Shape& s = run_shapes[si];
            const double flops = 2.0 * s.M * s.N * s.K;
            int col = 0;
            for (int bf : {0, 1})
                for (int nt : {1, 2}) {
                    double t = bf ? time_gemm<bf16>(s, nt, min_s) : time_gemm<float>(s, nt, min_s);
                    best[si][col] = std::max(best[si][col], flops / t / 1e9);
                    ++col;
                }
        }
        fprintf(stderr, "round %d/%d done\n", round + 1, rounds);
    }

    printf("measured fp32 FMA peak: %.1f GFLOP/s (1 thread, ~%.2f GHz at 32 flop/cycle), %.1f GFLOP/s (2 threads)\n",
           peak1, peak1 / 32, peak2);
    printf("\n%-28s %9s %9s %9s %9s   %s\n", "GFLOP/s   shape (MxNxK)", "fp32 1T", "fp32 2T", "bf16 1T", "bf16 2T",
           "fp32 1T/2T % of peak");
    for (size_t si = 0; si < run_shapes.size(); ++si) {
        const auto& g = best[si];
        printf("%-28s %9.1f %9.1f %9.1f %9.1f   %3.0f%% / %3.0f%%\n", run_shapes[si].name, g[0], g[1], g[2], g[3],
               peak1 > 0 ? 100.0 * g[0] / peak1 : 0.0, peak2 > 0 ? 100.0 * g[1] / peak2 : 0.0);
    }
    fflush(stdout);

    // Naive comparison on the square forward shape, 2 threads.
    {
        const int M = 1024, N = 768, K = 768;
        std::vector<float> A = random_vec<float>((size_t)M * K, 1), B = random_vec<float>((size_t)N * K, 2);
        std::vector<float> C1((size_t)M * N), C2((size_t)M * N);
        omp_set_num_threads(2);
        double t0 = now();
        naive_gemm_nt(M, N, K, A.data(), B.data(), C1.data());
        double tn = now() - t0;
        double tg = 1e30;
        for (int r = 0; r < 5; ++r) {
            t0 = now();
            gemm_cpu<float, float, float>(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C2.data(), N);
            tg = std::min(tg, now() - t0);
        }
        double maxdiff = 0;
        for (size_t i = 0; i < C1.size(); ++i) maxdiff = std::max(maxdiff, (double)std::fabs(C1[i] - C2[i]));
        const double flops = 2.0 * M * N * K;
        printf("\nnaive vs gemm_cpu, fp32 1024x768x768 transB, 2 threads: naive %.1f GFLOP/s (%.1f ms), "
               "gemm_cpu %.1f GFLOP/s (%.1f ms), %.0fx faster, max |diff| %.2g\n",
               flops / tn / 1e9, tn * 1e3, flops / tg / 1e9, tg * 1e3, tn / tg, maxdiff);
    }
    return 0;
}
