// Shared scaffolding of the kernel workbench (dev/cuda/<family>.cu): random
// inputs, device buffers, comparisons against the CPU twins, and timing.
//
// Every program: fills inputs from a fixed seed (never zeros), runs the CPU
// twin from kernels/cpu/ and our CUDA kernel, compares each output, prints
// PASS/FAIL per output, then (unless run with `check`) times the kernel with
// CUDA events (warm-up, then the median of N runs, L2 flushed before each run)
// and prints its bandwidth or FLOP rate. Exit status: 1 if any check failed.
//
// Comparison rules:
//   fp32:      max|out - ref| / max|ref| <= tol, tol = 1e-5 unless a test
//              states (and justifies) a looser one
//   bf16/fp16: ||out - ref||_2 / ||ref||_2 <= 1e-2
//   exact:     bit-for-bit (used where GPU and CPU do the same fp32 operations
//              in the same order)
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "zero/base/backend.h"
#include "kernels/cuda_common.cuh"
#include "zero/base/dtype.h"
#include "zero/layout/gpt2_config.h"
#include "zero/base/rng.h"

template <typename T> const char* tname() { return dtype_name(dtype_of<T>::value); }

// ----------------------------------------------------------------------------
// random host data (counter-based: the same values on every machine)

template <typename T>
std::vector<T> rand_vec(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    std::vector<T> v(n);
    for (size_t i = 0; i < n; i++) {
        float u = random_uniform(seed, i);  // (0, 1]
        float x = lo + (hi - lo) * u;
        if (x == 0.0f) x = 1e-3f;  // never an exact zero
        v[i] = from_float<T>(x);
    }
    return v;
}

inline std::vector<int> rand_ints(size_t n, uint64_t seed, int lo, int hi_exclusive) {
    std::vector<int> v(n);
    for (size_t i = 0; i < n; i++) v[i] = lo + (int)(random_u32(seed, i) % (uint32_t)(hi_exclusive - lo));
    return v;
}

// ----------------------------------------------------------------------------
// device buffers (freed at the end of the test that made them)

// Host -> device copy that is complete on return. A plain cudaMemcpy from
// pageable memory may return before its DMA has landed, and the kernels run on
// a non-blocking stream that does not wait for the legacy stream; so wait.
inline void h2d(void* dst, const void* src, size_t bytes) {
    cudaCheck(cudaDeviceSynchronize());  // nothing in flight still uses dst
    cudaCheck(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
    cudaCheck(cudaDeviceSynchronize());
}

template <typename T>
struct DevBuf {
    T* ptr = nullptr;
    size_t n = 0;
    DevBuf() = default;
    explicit DevBuf(size_t count) : n(count) { cudaCheck(cudaMalloc(&ptr, std::max<size_t>(count, 1) * sizeof(T))); }
    explicit DevBuf(const std::vector<T>& h) : DevBuf(h.size()) { upload(h); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
    ~DevBuf() {
        if (ptr) cudaFree(ptr);
    }
    void upload(const std::vector<T>& h) { h2d(ptr, h.data(), n * sizeof(T)); }
    std::vector<T> download() const {
        std::vector<T> h(n);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(h.data(), ptr, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
    operator T*() const { return ptr; }
};

// ----------------------------------------------------------------------------
// the bench: options, a kernel context like the trainer's, results

struct Bench {
    bool check_only = false;
    int reps = 20;
    int failures = 0;
    int checks = 0;
    void* flush_buf = nullptr;
    size_t flush_bytes = (size_t)256 << 20;  // larger than any L2

    Bench(int argc, char** argv) {
        for (int i = 1; i < argc; i++) {
            std::string a = argv[i];
            if (a == "check" || a == "--check") check_only = true;
            else if ((a == "--reps" || a == "-r") && i + 1 < argc) reps = std::max(1, atoi(argv[++i]));
            else {
                fprintf(stderr, "usage: %s [check] [--reps N]\n", argv[0]);
                exit(2);
            }
        }
        int dev = 0;
        cudaDeviceProp prop;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaGetDeviceProperties(&prop, dev));
        printf("device: %s (%d SMs, L2 %.0f MiB)%s\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize / 1048576.0,
               check_only ? "  [check mode]" : "");
        cudaCheck(cudaMalloc(&flush_buf, flush_bytes));
    }
    ~Bench() { cudaFree(flush_buf); }

    int finish() {
        printf("%s: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks, failures);
        return failures ? 1 : 0;
    }

    void record(bool ok, const std::string& what, const char* detail) {
        checks++;
        if (!ok) failures++;
        printf("  %-58s %s  %s\n", what.c_str(), detail, ok ? "PASS" : "FAIL");
    }

    // touch a buffer bigger than L2 so that the next run starts cold
    void flush_l2(cudaStream_t s) { cudaCheck(cudaMemsetAsync(flush_buf, 0, flush_bytes, s)); }

    // median time in ms of f() (which launches on stream s), L2 flushed before each run
    template <typename F>
    double time_ms(cudaStream_t s, F&& f, int warmup = 3) {
        for (int i = 0; i < warmup; i++) f();
        cudaEvent_t a, b;
        cudaCheck(cudaEventCreate(&a));
        cudaCheck(cudaEventCreate(&b));
        std::vector<float> t(reps);
        for (int i = 0; i < reps; i++) {
            flush_l2(s);
            cudaCheck(cudaEventRecord(a, s));
            f();
            cudaCheck(cudaEventRecord(b, s));
            cudaCheck(cudaEventSynchronize(b));
            cudaCheck(cudaEventElapsedTime(&t[i], a, b));
        }
        cudaCheck(cudaEventDestroy(a));
        cudaCheck(cudaEventDestroy(b));
        std::sort(t.begin(), t.end());
        return t[reps / 2];
    }

    // device-to-device copy bandwidth in GB/s (bytes read + bytes written),
    // for a copy of `bytes` bytes, measured the same way as the kernels
    double copy_gbps(cudaStream_t s, size_t bytes) {
        void *src = nullptr, *dst = nullptr;
        cudaCheck(cudaMalloc(&src, bytes));
        cudaCheck(cudaMalloc(&dst, bytes));
        cudaCheck(cudaMemsetAsync(src, 1, bytes, s));
        double ms = time_ms(s, [&] { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); });
        cudaCheck(cudaFree(src));
        cudaCheck(cudaFree(dst));
        return 2.0 * bytes / (ms * 1e-3) / 1e9;
    }
};

// A kernel context like create_kernel_ctx's, with the workspace sized by
// own_kernel_workspace_bytes for micro-batches of BT tokens of width C (so the
// sizing formula is exercised too), with the variants' needs where asked
// (encoder_split: its split run; wide_dbias: dbias_blocks's grid).
struct BenchCtx {
    KernelCtx ctx;
    BenchCtx(size_t BT, int C, int encoder_split = 0, bool wide_dbias = false) {
        ctx.stream = stream_create(Lane::Compute);
        cublasCheck(cublasLtCreate(&ctx.lt));
        ctx.lt_workspace_bytes = CUBLASLT_WORKSPACE_BYTES;
        cudaCheck(cudaMalloc(&ctx.lt_workspace, ctx.lt_workspace_bytes));
        ctx.workspace_bytes = own_kernel_workspace_bytes(BT, C, GPT2Config{}.num_heads, encoder_split, wide_dbias);
        cudaCheck(cudaMalloc(&ctx.workspace, ctx.workspace_bytes));
    }
    ~BenchCtx() {
        cudaDeviceSynchronize();
        cudaFree(ctx.workspace);
        cudaFree(ctx.lt_workspace);
        cublasLtDestroy(ctx.lt);
        stream_destroy(ctx.stream);
    }
    operator const KernelCtx&() const { return ctx; }
};

// ----------------------------------------------------------------------------
// comparisons

template <typename T>
bool is_finite_val(T x) {
    return std::isfinite(to_float(x));
}

// fp32: max abs error over max |ref|; 16-bit: relative L2 error. A non-finite
// value must sit where the reference has one too.
template <typename T>
bool check_close(Bench& b, const std::string& what, const std::vector<T>& got, const std::vector<T>& ref,
                 double tol_f32 = 1e-5, double tol_16 = 1e-2) {
    double max_err = 0, max_ref = 0, se = 0, sr = 0;
    size_t bad_nonfinite = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double g = to_float(got[i]), r = to_float(ref[i]);
        if (!std::isfinite(r) || !std::isfinite(g)) {
            if (std::isfinite(r) != std::isfinite(g)) bad_nonfinite++;
            continue;
        }
        max_err = std::max(max_err, std::fabs(g - r));
        max_ref = std::max(max_ref, std::fabs(r));
        se += (g - r) * (g - r);
        sr += r * r;
    }
    const bool f32 = sizeof(T) == 4;
    double metric = f32 ? (max_ref > 0 ? max_err / max_ref : max_err) : (sr > 0 ? std::sqrt(se / sr) : std::sqrt(se));
    double tol = f32 ? tol_f32 : tol_16;
    bool ok = metric <= tol && bad_nonfinite == 0;
    char detail[160];
    snprintf(detail, sizeof(detail), "%s %.2e (tol %.0e)%s", f32 ? "maxrel" : "l2rel", metric, tol,
             bad_nonfinite ? " NONFINITE MISMATCH" : "");
    b.record(ok, what, detail);
    return ok;
}

// bit-for-bit equality
template <typename T>
bool check_exact(Bench& b, const std::string& what, const std::vector<T>& got, const std::vector<T>& ref) {
    size_t bad = 0, first = (size_t)-1;
    for (size_t i = 0; i < ref.size(); i++)
        if (memcmp(&got[i], &ref[i], sizeof(T)) != 0) {
            if (!bad) first = i;
            bad++;
        }
    char detail[160];
    if (bad)
        snprintf(detail, sizeof(detail), "%zu/%zu differ (first at %zu: %g vs %g)", bad, ref.size(), first,
                 (double)to_float(got[first]), (double)to_float(ref[first]));
    else
        snprintf(detail, sizeof(detail), "bit-exact (%zu values)", ref.size());
    b.record(bad == 0, what, detail);
    return bad == 0;
}

// a scalar check with a stated relative tolerance
inline bool check_scalar(Bench& b, const std::string& what, double got, double ref, double tol) {
    double rel = std::fabs(got - ref) / std::max(std::fabs(ref), 1e-30);
    bool ok = std::isfinite(got) == std::isfinite(ref) && (!std::isfinite(ref) || rel <= tol);
    char detail[160];
    snprintf(detail, sizeof(detail), "%.9g vs %.9g rel %.2e (tol %.0e)", got, ref, rel, tol);
    b.record(ok, what, detail);
    return ok;
}

inline std::string shape_str(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
inline std::string shape_str(const char* fmt, ...) {
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    return buf;
}

inline void print_bw(const std::string& what, double ms, double bytes) {
    printf("  %-58s %8.3f ms  %7.1f GB/s\n", what.c_str(), ms, bytes / (ms * 1e-3) / 1e9);
}
inline void print_bw_vs_copy(const std::string& what, double ms, double bytes, double copy_gbps, double target) {
    double gbps = bytes / (ms * 1e-3) / 1e9;
    printf("  %-58s %8.3f ms  %7.1f GB/s = %5.1f%% of D2D copy (%.1f GB/s; target %.0f%%)\n", what.c_str(), ms, gbps,
           100.0 * gbps / copy_gbps, copy_gbps, 100.0 * target);
}
