// Benchmark of the CPU AdamW of optimizer offload (kernels/cpu/adamw_simd.h) against
// this machine's memory roofline, measured in the same run.
//
// build: g++ -std=c++17 -O3 -march=native -fopenmp -I. dev/bench_cpu_adamw.cpp kernels/cpu/adamw_simd.cpp -o build/bench_cpu_adamw -lpthread
// run:   build/bench_cpu_adamw [-n params (64M)] [-c copy MiB per buffer (512)] [-r reps (5)]
//                              [-t max threads (all)] [-i auto|all|avx512|avx2|scalar]
//
// Roofline: a multi-threaded copy between two buffers much larger than the last
// level cache, counted as bytes read + bytes written per second, best of -r runs
// and of two copy loops (glibc memcpy, which streams large copies, and our own
// loop with non-temporal stores). AdamW moves, per parameter, the fp32 master,
// m and v in and out (24 B), the gradient in (2 or 4 B) and the compute copy out
// (2 or 4 B): 28 B for (bf16, bf16), 32 B for (fp32, fp32). Its fraction of the
// roofline is (params/s * bytes/param) / copy bandwidth, against the copy at
// the same thread count and against the best copy on all threads.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sched.h>
#endif

// the streaming copy of the roofline (x86 only, AVX2 chosen at run time)
#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define BENCH_X86 1
#include <immintrin.h>
#else
#define BENCH_X86 0
#endif

#include "kernels/cpu/adamw_simd.h"

namespace {

double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Runs fn(tid) on t threads pinned to cpus[0..t-1], released together; returns
// the wall time from the release to the last one finishing.
template <typename F> double timed_parallel(int t, const std::vector<int>& cpus, F fn) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<double> end((size_t)t);
    std::vector<std::thread> th;
    for (int i = 0; i < t; i++)
        th.emplace_back([&, i] {
#if defined(__linux__)
            cpu_set_t set;
            CPU_ZERO(&set);
            CPU_SET(cpus[(size_t)i % cpus.size()], &set);
            pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
#endif
            ready++;
            while (!go.load(std::memory_order_acquire)) cpu_adamw_detail::cpu_relax();
            fn(i);
            end[(size_t)i] = now_s();
        });
    while (ready.load() < t) std::this_thread::yield();
    const double t0 = now_s();
    go.store(true, std::memory_order_release);
    for (auto& x : th) x.join();
    return *std::max_element(end.begin(), end.end()) - t0;
}

#if BENCH_X86
__attribute__((target("avx2"))) void copy_stream_avx2(char* dst, const char* src, size_t bytes) {
    // dst and src 64-byte aligned, bytes a multiple of 128
    for (size_t i = 0; i < bytes; i += 128) {
        __m256i a = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i));
        __m256i b = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i + 32));
        __m256i c = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i + 64));
        __m256i d = _mm256_load_si256(reinterpret_cast<const __m256i*>(src + i + 96));
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i), a);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 32), b);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 64), c);
        _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + i + 96), d);
    }
    _mm_sfence();
}
#endif

template <typename T> T* alloc(size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 4096, n * sizeof(T) + 4096) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return static_cast<T*>(p);
}

// first touch by the threads that will use the memory
template <typename T, typename F> void fill_parallel(T* p, size_t n, int t, const std::vector<int>& cpus, F f) {
    timed_parallel(t, cpus, [&](int i) {
        size_t b = n * (size_t)i / (size_t)t, e = n * (size_t)(i + 1) / (size_t)t;
        for (size_t k = b; k < e; k++) p[k] = f(k);
    });
}

struct CopyResult {
    double memcpy_gbs, stream_gbs;
    double best() const { return std::max(memcpy_gbs, stream_gbs); }
};

CopyResult copy_bandwidth(char* dst, const char* src, size_t bytes, int t, const std::vector<int>& cpus, int reps) {
    CopyResult r{0, 0};
    const size_t chunk = bytes / (size_t)t / 128 * 128;
    for (int rep = 0; rep < reps; rep++) {
        double s = timed_parallel(t, cpus, [&](int i) { memcpy(dst + chunk * i, src + chunk * i, chunk); });
        r.memcpy_gbs = std::max(r.memcpy_gbs, 2.0 * chunk * t / s / 1e9);
#if BENCH_X86
        if (CpuAdamW::isa_supported(CpuIsa::AVX2)) {
            s = timed_parallel(t, cpus, [&](int i) { copy_stream_avx2(dst + chunk * i, src + chunk * i, chunk); });
            r.stream_gbs = std::max(r.stream_gbs, 2.0 * chunk * t / s / 1e9);
        }
#endif
    }
    return r;
}

struct Buffers {
    size_t n;
    float *w, *m, *v;
    float* gf;
    bf16* gb;
    float* pf;
    bf16* pb;
};

template <typename Tg, typename Tp>
double adamw_seconds(CpuAdamW& opt, Buffers& b, const Tg* g, Tp* p, int reps) {
    AdamWStep s{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f / 1024, 0.5f, 0.3f, 0};
    double best = 1e30;
    for (int rep = 0; rep <= reps; rep++) {  // the first is a warm-up
        s.rounding_seed = (uint64_t)rep;
        const double t0 = now_s();
        opt.step(b.w, b.m, b.v, g, p, b.n, s, 0);
        const double dt = now_s() - t0;
        if (rep > 0) best = std::min(best, dt);
    }
    return best;
}

}  // namespace

int main(int argc, char** argv) {
    size_t n = (size_t)64 << 20;
    size_t copy_mb = 512;
    int reps = 5;
    int max_threads = 0;
    std::string isa_arg = "auto";
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "-n") n = strtoull(argv[i + 1], nullptr, 10);
        else if (a == "-c") copy_mb = strtoull(argv[i + 1], nullptr, 10);
        else if (a == "-r") reps = atoi(argv[i + 1]);
        else if (a == "-t") max_threads = atoi(argv[i + 1]);
        else if (a == "-i") isa_arg = argv[i + 1];
        else {
            fprintf(stderr, "unknown option %s\n", argv[i]);
            return 1;
        }
    }
    const std::vector<int> cpus = cpu_adamw_detail::allowed_cpus();
    const int nproc = (int)cpus.size();
    if (max_threads <= 0 || max_threads > nproc) max_threads = nproc;

    std::vector<CpuIsa> isas;
    if (isa_arg == "all") {
        for (CpuIsa i : {CpuIsa::AVX512, CpuIsa::AVX2, CpuIsa::Scalar})
            if (CpuAdamW::isa_supported(i)) isas.push_back(i);
    } else if (isa_arg == "auto") {
        isas.push_back(CpuAdamW::best_isa());
    } else {
        CpuIsa i = isa_arg == "avx512" ? CpuIsa::AVX512 : isa_arg == "avx2" ? CpuIsa::AVX2 : CpuIsa::Scalar;
        if (!CpuAdamW::isa_supported(i)) {
            fprintf(stderr, "%s not supported here\n", isa_arg.c_str());
            return 1;
        }
        isas.push_back(i);
    }

    printf("cpus allowed: %d, AdamW n = %zu params, copy buffers 2 x %zu MiB, best of %d\n", nproc, n, copy_mb, reps);

    // --- roofline: copy bandwidth per thread count
    const size_t bytes = copy_mb << 20;
    char* src = alloc<char>(bytes);
    char* dst = alloc<char>(bytes);
    fill_parallel(src, bytes, nproc, cpus, [](size_t k) { return (char)k; });
    fill_parallel(dst, bytes, nproc, cpus, [](size_t) { return (char)0; });
    std::vector<CopyResult> copy((size_t)max_threads + 1);
    double copy_best = 0;
    for (int t = 1; t <= max_threads; t++) {
        copy[(size_t)t] = copy_bandwidth(dst, src, bytes, t, cpus, reps);
        copy_best = std::max(copy_best, copy[(size_t)t].best());
    }
    free(src);
    free(dst);

    // --- AdamW buffers
    Buffers b;
    b.n = n;
    b.w = alloc<float>(n), b.m = alloc<float>(n), b.v = alloc<float>(n);
    b.gf = alloc<float>(n), b.gb = alloc<bf16>(n), b.pf = alloc<float>(n), b.pb = alloc<bf16>(n);
    fill_parallel(b.w, n, nproc, cpus, [](size_t k) { return 0.01f * (float)((k * 2654435761u) % 1000) - 5.0f; });
    fill_parallel(b.m, n, nproc, cpus, [](size_t k) { return 1e-3f * (float)((k * 40503u) % 97) - 0.05f; });
    fill_parallel(b.v, n, nproc, cpus, [](size_t k) { return 1e-6f * (float)((k * 9973u) % 101 + 1); });
    fill_parallel(b.gf, n, nproc, cpus, [](size_t k) { return 1e-2f * (float)((k * 7919u) % 201) - 1.0f; });
    fill_parallel(b.gb, n, nproc, cpus, [](size_t k) { return from_float<bf16>(1e-2f * (float)((k * 7919u) % 201) - 1.0f); });
    fill_parallel(b.pf, n, nproc, cpus, [](size_t) { return 0.0f; });
    fill_parallel(b.pb, n, nproc, cpus, [](size_t) { return bf16{0}; });

    const double bytes_bf16 = 24 + 2 + 2, bytes_f32 = 24 + 4 + 4;
    printf("\ncopy: GB/s (read + write); adamw: Mparam/s, GB/s, %% of the copy at the same threads / of the best copy "
           "(%.1f GB/s)\n",
           copy_best);
    printf("%-7s %7s %7s | %-6s %9s %7s %6s %6s | %9s %7s %6s %6s\n", "threads", "memcpy", "stream", "isa",
           "bf16/bf16", "GB/s", "%same", "%best", "f32/f32", "GB/s", "%same", "%best");
    for (CpuIsa isa : isas) {
        for (int t = 1; t <= max_threads; t++) {
            std::vector<int> cores(cpus.begin(), cpus.begin() + t);
            CpuAdamW opt(t, cores, isa);
            const double sb = adamw_seconds(opt, b, b.gb, b.pb, reps);
            const double sf = adamw_seconds(opt, b, b.gf, b.pf, reps);
            const double pb = n / sb, pf = n / sf;
            const double gbb = pb * bytes_bf16 / 1e9, gbf = pf * bytes_f32 / 1e9;
            const double same = copy[(size_t)t].best();
            printf("%-7d %7.1f %7.1f | %-6s %9.0f %7.1f %5.0f%% %5.0f%% | %9.0f %7.1f %5.0f%% %5.0f%%\n", t,
                   copy[(size_t)t].memcpy_gbs, copy[(size_t)t].stream_gbs, opt.isa(), pb / 1e6, gbb,
                   100 * gbb / same, 100 * gbb / copy_best, pf / 1e6, gbf, 100 * gbf / same, 100 * gbf / copy_best);
        }
    }

    // --- streaming stores of the param copy on / off, all threads
    {
        std::vector<int> cores(cpus.begin(), cpus.begin() + max_threads);
        CpuAdamW opt(max_threads, cores, isas[0]);
        printf("\nparam copy stores, %d threads, %s:", max_threads, opt.isa());
        for (bool nt : {true, false}) {
            opt.set_streaming_threshold(nt ? 0 : SIZE_MAX);
            const double sb = adamw_seconds(opt, b, b.gb, b.pb, reps);
            const double sf = adamw_seconds(opt, b, b.gf, b.pf, reps);
            printf("  %s: bf16 %.1f GB/s, f32 %.1f GB/s;", nt ? "streaming" : "normal", n / sb * bytes_bf16 / 1e9,
                   n / sf * bytes_f32 / 1e9);
        }
        printf("\n");
    }

    // --- small calls: the cost of handing a piece to the pool
    {
        printf("\nsmall calls (bf16/bf16, data in cache), microseconds per call:\n%-9s", "n");
        std::vector<size_t> sizes = {1024, 4096, 16384, 65536, 262144, 1048576};
        for (size_t s : sizes) printf(" %9zu", s);
        printf("\n");
        const char* modes[] = {"", " dflt", " split", " cold"};
        for (int t : {1, max_threads}) {
            for (int mode = 0; mode < 4; mode++) {
                if ((t == 1) != (mode == 0)) continue;
                std::vector<int> cores(cpus.begin(), cpus.begin() + t);
                CpuAdamW opt(t, cores, isas[0]);
                if (mode == 2) opt.set_min_per_thread(1);
                printf("%-9s", (std::to_string(t) + modes[mode]).c_str());
                for (size_t s : sizes) {
                    AdamWStep st{1e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f / 1024, 0.5f, 0.3f, 0};
                    const int calls = mode == 3 ? 20 : (int)std::max<size_t>(20, (size_t)(1 << 24) / s);
                    double best = 1e30;
                    for (int rep = 0; rep < 3; rep++) {
                        double total = 0;
                        for (int c = 0; c < calls; c++) {
                            // cold: the workers have gone to sleep before each call
                            if (mode == 3) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                            const double t0 = now_s();
                            opt.step(b.w, b.m, b.v, b.gb, b.pb, s, st, 0);
                            total += now_s() - t0;
                        }
                        best = std::min(best, total / calls);
                    }
                    printf(" %9.2f", best * 1e6);
                }
                printf("\n");
            }
        }
        {
            CpuAdamW probe(2);
            printf("(dflt: calls below 2 x %zu elements stay on the calling thread; split: every call is split;\n"
                   " cold: default, with the workers asleep when the call comes)\n",
                   probe.min_per_thread());
        }
    }
    return 0;
}
