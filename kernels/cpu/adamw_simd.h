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
// Code paths, chosen at run time (adamw_simd.cpp compiles them on any x86-64
// whatever -march is; elsewhere only the scalar path exists):
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
// Threads. The caller and num_threads - 1 pooled workers, each pinned to one
// core, claim contiguous chunks of n (about 4 per participant, none under
// min_per_thread(), edges on 64-byte lines of `master`) by compare-and-swap, so
// whoever runs does the work: a worker the OS has not scheduled yet delays the
// call by at most the chunk it holds. Calls under 2 x min_per_thread() run on
// the caller alone. Workers spin briefly after a call (one optimizer step's
// calls find them awake), then sleep, and run with the caller's MXCSR. Cores:
// an explicit list (cores[0] the caller's, not re-pinned; used cyclically), or
// the next num_threads of a process-wide cursor over the allowed CPUs, one
// hardware thread per physical core first, so emulated ranks' optimizers get
// disjoint cores while there are enough. Results never depend on the threads,
// the chunking or the pinning.
//
// Memory: each element is touched once (28 B per parameter for bf16/bf16);
// calls of at least set_streaming_threshold() elements (default 1M) write the
// copy with non-temporal stores (dev/bench_cpu_adamw.cpp measures it). One
// step() at a time per object. Definitions: adamw_simd.cpp, its vector paths one
// body over an ISA trait (adamw_simd_body.inc).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "zero/base/dtype.h"

enum class CpuIsa : int { Auto = -1, Scalar = 0, AVX2 = 1, AVX512 = 2 };

// "avx512", "avx2", "scalar" or "auto"
const char* cpu_isa_name(CpuIsa isa);

namespace cpu_adamw_detail {

// The per-step scalars, derived once per call exactly as adamw_update derives them.
struct Consts {
    float b1, omb1, b2, omb2, bc1, bc2, eps, wd, nlr, gs;
    uint64_t seed;
};

// The CPUs this process may run on, one hardware thread of every physical core
// first (lowest id first), then the second SMT siblings, and so on.
std::vector<int> allowed_cpus();

// One pause of a spin-wait loop (PAUSE on x86, a yield elsewhere).
void cpu_relax();

// The building blocks of one vector path (AVX2 or AVX512, which this CPU must
// have) on whole arrays, for the tests, which check each against its scalar
// twin: n is a multiple of the path's lanes (16 for AVX512, 8 for AVX2).
// fp16 with round to nearest even, NaN -> sign | 0x7e00 (float_to_half_bits)
void vector_to_f16(CpuIsa isa, const float* x, uint16_t* out, size_t n);
// bf16_from_float_stochastic(x[i], rnd[i])
void vector_bf16_stochastic(CpuIsa isa, const float* x, const uint32_t* rnd, uint16_t* out, size_t n);
// rounding_bits(seed, idx + lane) for the lanes of one vector
void vector_rounding_bits(CpuIsa isa, uint64_t seed, uint64_t idx, uint32_t* out);

}  // namespace cpu_adamw_detail

class CpuAdamW {
   public:
    // num_threads <= 0: as many as this process has CPUs. cores: see the header
    // comment (empty: the process-wide cursor). pin = false leaves every thread
    // to the OS scheduler.
    explicit CpuAdamW(int num_threads = 0, const std::vector<int>& cores = {}, CpuIsa isa = CpuIsa::Auto,
                      bool pin = true);
    ~CpuAdamW();

    CpuAdamW(const CpuAdamW&) = delete;
    CpuAdamW& operator=(const CpuAdamW&) = delete;

    // master, m, v: fp32 (n), updated in place; grad: Tg (n); param_out: Tp (n)
    // or null. Element i is element full_offset + i of the full flat buffer
    // (the key of the bf16 stochastic rounding). Blocks until done.
    template <typename Tg, typename Tp>
    void step(float* master, float* m, float* v, const Tg* grad, Tp* param_out, size_t n, const AdamWStep& s,
              size_t full_offset);
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
    bool force_isa(CpuIsa isa);
    static bool isa_supported(CpuIsa isa);
    static CpuIsa best_isa();

    int num_threads() const { return nthreads_; }
    // cores()[0]: the caller's nominal core (not pinned); cores()[j]: worker j; -1 = not pinned
    const std::vector<int>& cores() const { return cores_; }

    // Fewest elements worth a participant (and a chunk) of their own. Default 4096 (~120 KB of traffic).
    void set_min_per_thread(size_t n) { min_per_thread_ = n; }
    size_t min_per_thread() const { return min_per_thread_; }
    // The header's streaming threshold; SIZE_MAX: never.
    void set_streaming_threshold(size_t n) { nt_threshold_ = n; }

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
    static void run_chunk(const Job& j, size_t k);
    // Hands job_ (filled in by step) to the caller and the workers and waits for it.
    void run_job();

    // The work word: generation (upper 32 bits) | next chunk to claim (16) |
    // number of chunks (16), claimed as the header says. A claim can only
    // succeed while the caller waits for that generation, so job_ is stable
    // for whoever holds a claim.
    void publish(size_t nchunks);
    // Claims and runs chunks of generation `gen` until none is left.
    void work(uint64_t gen);
    void wait_done(size_t nchunks);
    void worker_loop(int id);

    int nthreads_ = 1;
    CpuIsa isa_ = CpuIsa::Scalar;
    std::vector<int> cores_;
    size_t min_per_thread_ = 4096;
    size_t nt_threshold_ = (size_t)1 << 20;
    // how long idle workers (and the caller waiting for them) spin before they sleep
    static constexpr int kSpinUs = 200;

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
