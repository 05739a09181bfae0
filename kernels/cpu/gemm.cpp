// The CPU GEMM of kernels/cpu/gemm.h. One file for one GEMM: the packing writes the
// layout the micro-kernel reads, in the blocking the driver (Gemm) picks, and the
// determinism argument below holds only for the three together.
//
// Blocking scheme (the classic "packed panels + register-blocked micro-kernel"):
//
//   for jc over N in panels of NC columns
//     for io over M in row blocks of MO rows  (MO = M unless a 2-byte C needs an fp32 scratch)
//       for each group of consecutive K blocks (kc <= 256 each; a group is as many
//       blocks as fit a 3MB packed panel, so narrow panels take several at once):
//         pack op(B)[group's K range, jc panel] into Bp (fp32, NR-wide slivers), shared by the team
//         --- barrier ---
//         parallel over output tiles (<= 144 rows x a range of NR-column slivers):
//           for each K block p of the group, in order:
//             pack op(A)[tile rows, block p] into Ap (fp32, MR-tall slivers), per thread
//             for each NR sliver of B (stays in L1), for each MR sliver of A (from L2):
//               micro-kernel: MR x NR accumulators in registers, k = 0..kc-1 in order, then
//               p == 0:        Z = alpha*acc (+ beta*C)
//               p > 0:         Z = Z + alpha*acc
//               where Z is C itself for an fp32 C, else an fp32 scratch, and for a 2-byte C
//               the last block writes C = round(Z + alpha*acc + beta*C): rounded once.
//         --- barrier ---
//
//   MR x NR = 6 x 16 with AVX2/FMA: 12 ymm accumulators, 2 B loads and 6 broadcasts per k.
//   While one K block is computed, the tile's A rows of the next block are prefetched,
//   and C tiles are prefetched a few micro-tiles ahead (the LM head shapes stream
//   hundreds of MB of A or C).
//
// Why it is deterministic and independent of the thread count: threads only ever split
// the set of output tiles (and the copying in the packing steps); K is never split
// across threads. The value of each C element is computed by the same micro-kernel
// from the same zero-padded packed data, summing k in order inside a K block and
// adding the K blocks in order, and the K blocking is a function of K alone. Which
// thread computes a tile, and how M and N are cut into tiles, only decides *where*
// that arithmetic runs, never its order. So C is bit-identical for any number of
// threads (and any scheduling).
#include "kernels/cpu/gemm.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <type_traits>

#ifdef _OPENMP
#include <omp.h>
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define GEMM_CPU_AVX2 1
#endif

namespace gemm_cpu_detail {

// ---------------------------------------------------------------------------
// Blocking parameters. MR/NR/KC_MAX influence the arithmetic (KC_MAX sets where
// K is cut); MC_MAX/NC_MAX/SCRATCH_FLOATS only decide how work is grouped.

constexpr int MR = 6;          // rows of a micro-tile
constexpr int NR = 16;         // columns of a micro-tile (two 8-float vectors)
constexpr int KC_MAX = 256;    // K block: a 16KB B sliver (kc x NR) stays in L1
constexpr int MC_MAX = 144;    // rows per tile: the A block (mc x kc, 144KB) stays in L2
constexpr int NC_MAX = 3072;   // columns per B panel: kc x NC (3MB) stays in L3
constexpr int PF_TILES = 4;    // the C tile this many micro-tiles ahead is prefetched
constexpr int PF_LOCALITY = 2; // next K block of A is prefetched into L2 (prefetcht1)
constexpr size_t SCRATCH_FLOATS = size_t(2) << 20;  // cap on the fp32 scratch (8MB)
// Below this many multiply-adds a single thread beats the cost of waking a team.
constexpr double PARALLEL_MIN_MACS = 96.0 * 96.0 * 96.0;

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

// A growable, 64-byte aligned float buffer. Kept per thread (thread_local) so that
// repeated calls don't pay for allocation and page faults every time.
struct AlignedBuf {
    float* p = nullptr;
    size_t cap = 0;
    AlignedBuf() = default;
    AlignedBuf(const AlignedBuf&) = delete;
    AlignedBuf& operator=(const AlignedBuf&) = delete;
    ~AlignedBuf() { std::free(p); }
    float* get(size_t n) {
        if (n > cap) {
            std::free(p);
            size_t bytes = ((n * sizeof(float)) + 63) / 64 * 64;
            p = static_cast<float*>(std::aligned_alloc(64, bytes));
            if (!p) std::abort();  // out of memory: nothing sensible to return
            cap = n;
        }
        return p;
    }
};
enum BufId { BUF_A = 0, BUF_B = 1, BUF_Z = 2 };
inline float* thread_buffer(BufId id, size_t n) {
    static thread_local AlignedBuf bufs[3];
    return bufs[id].get(n);
}

// Scalar fused multiply-add where the hardware has one, so that partial (edge)
// tiles do the same arithmetic as the vector code of full tiles.
inline float fma_s(float a, float b, float c) {
#ifdef __FMA__
    return __builtin_fmaf(a, b, c);
#else
    return a * b + c;
#endif
}

// ---------------------------------------------------------------------------
// 8-wide loads that widen to fp32 and 16-wide stores that narrow from fp32 (AVX2 only).

#ifdef GEMM_CPU_AVX2
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const bf16* p) {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
inline __m256 load8(const f16* p) {
#ifdef __F16C__
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#else
    alignas(32) float t[8];
    for (int i = 0; i < 8; ++i) t[i] = to_float(p[i]);
    return _mm256_load_ps(t);
#endif
}
// Stores of 16 values (one micro-tile row) from two fp32 vectors, narrowing to TD.
inline void store16(float* p, __m256 lo, __m256 hi) {
    _mm256_storeu_ps(p, lo);
    _mm256_storeu_ps(p + 8, hi);
}
// Round to nearest even exactly like bf16_from_float (NaN -> quiet NaN); the
// results are 16-bit values in 32-bit lanes.
inline __m256i bf16_round(__m256 v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_add_epi32(u, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
    r = _mm256_srli_epi32(r, 16);
    const __m256i absu = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
    const __m256i isnan = _mm256_cmpgt_epi32(absu, _mm256_set1_epi32(0x7f800000));
    const __m256i qnan = _mm256_or_si256(_mm256_srli_epi32(u, 16), _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(r, qnan, isnan);
}
inline void store16(bf16* p, __m256 lo, __m256 hi) {
    // packus interleaves the 128-bit lanes of its inputs; the permute restores the order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bf16_round(lo), bf16_round(hi)), 0xD8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
}
inline void store16(f16* p, __m256 lo, __m256 hi) {
#ifdef __F16C__
    // Hardware round-to-nearest-even; identical to f16_from_float for all non-NaN values.
    const int mode = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(lo, mode));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8), _mm256_cvtps_ph(hi, mode));
#else
    alignas(32) float t[16];
    _mm256_store_ps(t, lo);
    _mm256_store_ps(t + 8, hi);
    for (int i = 0; i < 16; ++i) p[i] = from_float<f16>(t[i]);
#endif
}
#endif

// ---------------------------------------------------------------------------
// Packing. Packed buffers are fp32 and zero-padded to whole MR / NR slivers, so the
// micro-kernel always computes a full MR x NR tile; edge tiles just store less.
// Packing only copies and widens (exactly), so how it is vectorised or split among
// threads cannot change any result.

#ifdef GEMM_CPU_AVX2
// In-place transpose of an 8x8 block held as 8 row vectors.
inline void transpose8x8(__m256 r[8]) {
    const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
    const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
    const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
    const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
    const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
    const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
    const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
    const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}
// 4-wide widening load (for the MR = 6 = 4 + 2 rows of a transposed A sliver).
inline __m128 load4(const float* p) { return _mm_loadu_ps(p); }
inline __m128 load4(const bf16* p) {
    const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
    return _mm_castsi128_ps(_mm_slli_epi32(_mm_cvtepu16_epi32(h), 16));
}
inline __m128 load4(const f16* p) {
#ifdef __F16C__
    return _mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
#else
    return _mm_setr_ps(to_float(p[0]), to_float(p[1]), to_float(p[2]), to_float(p[3]));
#endif
}
#endif

// op(A) rows [i0, i0+mc) x K range [k0, k0+kc) -> Ap as ceil(mc/MR) slivers of
// kc x MR (k-major: the MR values of one k are adjacent).
template <typename TA>
void pack_A(bool transA, const TA* A, int lda, int i0, int mc, int k0, int kc, float* Ap) {
    static_assert(MR == 6, "the vector packing paths below assume MR == 6");
    for (int r = 0; r < mc; r += MR) {
        const int mr = std::min(MR, mc - r);
        float* dst = Ap + (size_t)r * kc;
        if (transA) {
            // A stored K x M: the MR values of one k are contiguous in memory.
            const TA* src = A + (size_t)k0 * lda + (i0 + r);
#ifdef GEMM_CPU_AVX2
            if (mr == MR) {
                for (int k = 0; k < kc; ++k, src += lda, dst += MR) {
                    _mm_storeu_ps(dst, load4(src));
                    dst[4] = to_float(src[4]);
                    dst[5] = to_float(src[5]);
                }
                continue;
            }
#endif
            for (int k = 0; k < kc; ++k, src += lda, dst += MR)
                for (int i = 0; i < MR; ++i) dst[i] = i < mr ? to_float(src[i]) : 0.0f;
        } else {
            // A stored M x K: the MR rows are read sequentially and interleaved.
            const TA* s[MR];
            for (int i = 0; i < MR; ++i) s[i] = A + (size_t)(i0 + r + std::min(i, mr - 1)) * lda + k0;
            int k = 0;
#ifdef GEMM_CPU_AVX2
            if (mr == MR) {
                // 8 k-values of the 6 rows at a time, transposed as an 8x8 block
                // with two zero rows; each column then holds the MR values of one k.
                for (; k + 8 <= kc; k += 8) {
                    __m256 v[8] = {load8(s[0] + k), load8(s[1] + k), load8(s[2] + k), load8(s[3] + k),
                                   load8(s[4] + k), load8(s[5] + k), _mm256_setzero_ps(), _mm256_setzero_ps()};
                    transpose8x8(v);
                    float* d = dst + (size_t)k * MR;
                    for (int c = 0; c < 8; ++c) {  // 6 useful floats per column: store 4 + 2
                        _mm_storeu_ps(d + c * MR, _mm256_castps256_ps128(v[c]));
                        _mm_storel_pi(reinterpret_cast<__m64*>(d + c * MR + 4), _mm256_extractf128_ps(v[c], 1));
                    }
                }
            }
#endif
            for (; k < kc; ++k)
                for (int i = 0; i < MR; ++i) dst[(size_t)k * MR + i] = i < mr ? to_float(s[i][k]) : 0.0f;
        }
    }
}

// One NR-column sliver of op(B): K range [k0, k0+kc), columns [j0, j0+nr) -> dst
// as kc x NR (k-major: the NR values of one k are adjacent), zero-padded to NR.
template <typename TB>
void pack_B_sliver(bool transB, const TB* B, int ldb, int k0, int kc, int j0, int nr, float* dst) {
    static_assert(NR == 16, "the vector packing paths below assume NR == 16");
    if (!transB) {
        // B stored K x N: the NR values of one k are contiguous.
        const TB* src = B + (size_t)k0 * ldb + j0;
#ifdef GEMM_CPU_AVX2
        if (nr == NR) {
            for (int k = 0; k < kc; ++k, src += ldb, dst += NR) {
                _mm256_store_ps(dst, load8(src));
                _mm256_store_ps(dst + 8, load8(src + 8));
            }
            return;
        }
#endif
        for (int k = 0; k < kc; ++k, src += ldb, dst += NR)
            for (int j = 0; j < NR; ++j) dst[j] = j < nr ? to_float(src[j]) : 0.0f;
    } else {
        // B stored N x K: NR rows read sequentially, transposed in 8x8 blocks.
        int k = 0;
#ifdef GEMM_CPU_AVX2
        if (nr == NR) {
            const TB* s = B + (size_t)j0 * ldb + k0;
            for (; k + 8 <= kc; k += 8) {
                for (int h = 0; h < 2; ++h) {  // columns j0 + 8h .. j0 + 8h + 7
                    const TB* sh = s + (size_t)(8 * h) * ldb + k;
                    __m256 v[8];
                    for (int j = 0; j < 8; ++j) v[j] = load8(sh + (size_t)j * ldb);
                    transpose8x8(v);
                    for (int c = 0; c < 8; ++c) _mm256_store_ps(dst + (size_t)(k + c) * NR + 8 * h, v[c]);
                }
            }
        }
#endif
        for (int j = 0; j < NR; ++j) {
            const TB* src = B + (size_t)(j0 + std::min(j, nr - 1)) * ldb + k0;
            for (int kk = k; kk < kc; ++kk) dst[(size_t)kk * NR + j] = j < nr ? to_float(src[kk]) : 0.0f;
        }
    }
}

// ---------------------------------------------------------------------------
// Software prefetch of the next K block of a tile's A rows, spread over the
// micro-kernel calls of the current block so that the (memory-bound) packing of
// the big operand in the LM-head backward shapes overlaps with arithmetic.
struct LinePrefetcher {
    uintptr_t base = 0;      // address of the first element of the first row
    size_t stride = 0;       // bytes between rows
    int rows = 0;            // rows to fetch
    size_t seg = 0;          // bytes per row
    int row = 0;
    uintptr_t line = 0, last = 0;  // current and last cache line of the current row
    int per_step = 0;        // lines per call of step()

    void start(const void* p, size_t stride_, int rows_, size_t seg_, int nsteps) {
        *this = {reinterpret_cast<uintptr_t>(p), stride_, rows_, seg_};  // from row 0
        set_row();
        const size_t total = (size_t)rows * (seg / 64 + 2);
        per_step = (int)std::min<size_t>(64, (total + nsteps - 1) / std::max(1, nsteps));
    }
    void set_row() {
        const uintptr_t a = base + row * stride;
        line = a & ~uintptr_t(63);
        last = (a + seg - 1) & ~uintptr_t(63);
    }
    void step() {
        for (int n = 0; n < per_step && row < rows; ++n) {
            __builtin_prefetch(reinterpret_cast<const void*>(line), 0, PF_LOCALITY);
            line += 64;
            if (line > last && ++row < rows) set_row();
        }
    }
};

// ---------------------------------------------------------------------------
// Where a finished MR x NR accumulator tile goes. The stored value is
//     v = alpha * acc;  if (z) v = z + v;  if (load_d) v = fma(beta, d, v);  d = round_TD(v)
// which covers every case: the first K block (z = null, d = C with beta, or d = the
// fp32 scratch), later blocks of an fp32 C (z = d = C), middle blocks of a 2-byte C
// (z = d = scratch) and its last block (z = scratch, d = C with beta: C is rounded
// once, here). Only the top-left mr x nr part of the tile is stored.
template <typename TD> struct TileOut {
    TD* d;
    int ldd;
    const float* z;  // fp32 partial sums to add, or null
    int ldz;
    float alpha, beta;
    bool load_d;
};

template <typename TD> inline void store_tile_scalar(const float* acc, const TileOut<TD>& o, int mr, int nr) {
    for (int i = 0; i < mr; ++i) {
        TD* d = o.d + (size_t)i * o.ldd;
        const float* z = o.z ? o.z + (size_t)i * o.ldz : nullptr;
        for (int j = 0; j < nr; ++j) {
            float v = o.alpha * acc[i * NR + j];
            if (z) v = z[j] + v;
            if (o.load_d) v = fma_s(o.beta, to_float(d[j]), v);
            d[j] = from_float<TD>(v);
        }
    }
}

// The micro-kernel: acc[MR][NR] = sum over k (in order) of a[k][:] (outer) b[k][:],
// then store. a: MR floats per k, b: NR floats per k (32-byte aligned).
#ifdef GEMM_CPU_AVX2
template <typename TD>
inline void micro_kernel(int kc, const float* __restrict a, const float* __restrict b, const TileOut<TD>& o,
                         int mr, int nr) {
    __m256 c00 = _mm256_setzero_ps(), c01 = _mm256_setzero_ps();
    __m256 c10 = _mm256_setzero_ps(), c11 = _mm256_setzero_ps();
    __m256 c20 = _mm256_setzero_ps(), c21 = _mm256_setzero_ps();
    __m256 c30 = _mm256_setzero_ps(), c31 = _mm256_setzero_ps();
    __m256 c40 = _mm256_setzero_ps(), c41 = _mm256_setzero_ps();
    __m256 c50 = _mm256_setzero_ps(), c51 = _mm256_setzero_ps();
    // Warm the destination rows while the k loop runs.
    for (int i = 0; i < mr; ++i) _mm_prefetch(reinterpret_cast<const char*>(o.d + (size_t)i * o.ldd), _MM_HINT_T0);
#if defined(__GNUC__) && !defined(__CUDACC__) && !defined(__clang__)
#pragma GCC unroll 4
#endif
    for (int k = 0; k < kc; ++k) {
        const __m256 b0 = _mm256_load_ps(b), b1 = _mm256_load_ps(b + 8);
        __m256 av;
        av = _mm256_broadcast_ss(a + 0); c00 = _mm256_fmadd_ps(av, b0, c00); c01 = _mm256_fmadd_ps(av, b1, c01);
        av = _mm256_broadcast_ss(a + 1); c10 = _mm256_fmadd_ps(av, b0, c10); c11 = _mm256_fmadd_ps(av, b1, c11);
        av = _mm256_broadcast_ss(a + 2); c20 = _mm256_fmadd_ps(av, b0, c20); c21 = _mm256_fmadd_ps(av, b1, c21);
        av = _mm256_broadcast_ss(a + 3); c30 = _mm256_fmadd_ps(av, b0, c30); c31 = _mm256_fmadd_ps(av, b1, c31);
        av = _mm256_broadcast_ss(a + 4); c40 = _mm256_fmadd_ps(av, b0, c40); c41 = _mm256_fmadd_ps(av, b1, c41);
        av = _mm256_broadcast_ss(a + 5); c50 = _mm256_fmadd_ps(av, b0, c50); c51 = _mm256_fmadd_ps(av, b1, c51);
        a += MR;
        b += NR;
    }
    const __m256 acc[MR][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}, {c40, c41}, {c50, c51}};
    if (mr == MR && nr == NR) {
        const __m256 va = _mm256_set1_ps(o.alpha), vb = _mm256_set1_ps(o.beta);
        for (int i = 0; i < MR; ++i) {
            TD* d = o.d + (size_t)i * o.ldd;
            __m256 v[2];
            for (int h = 0; h < 2; ++h) {
                v[h] = _mm256_mul_ps(va, acc[i][h]);
                if (o.z) v[h] = _mm256_add_ps(_mm256_loadu_ps(o.z + (size_t)i * o.ldz + 8 * h), v[h]);
                if (o.load_d) v[h] = _mm256_fmadd_ps(vb, load8(d + 8 * h), v[h]);
            }
            store16(d, v[0], v[1]);
        }
    } else {
        alignas(32) float t[MR * NR];
        for (int i = 0; i < MR; ++i) {
            _mm256_store_ps(t + i * NR, acc[i][0]);
            _mm256_store_ps(t + i * NR + 8, acc[i][1]);
        }
        store_tile_scalar(t, o, mr, nr);
    }
}
#else
// Portable version: plain loops the compiler can vectorise for whatever it targets.
template <typename TD>
inline void micro_kernel(int kc, const float* __restrict a, const float* __restrict b, const TileOut<TD>& o,
                         int mr, int nr) {
    float acc[MR * NR] = {};
    for (int k = 0; k < kc; ++k, a += MR, b += NR)
        for (int i = 0; i < MR; ++i) {
            const float ai = a[i];
            for (int j = 0; j < NR; ++j) acc[i * NR + j] = fma_s(ai, b[j], acc[i * NR + j]);
        }
    store_tile_scalar(acc, o, mr, nr);
}
#endif

// C = beta * C (K == 0 or alpha == 0): A and B are not read; beta == 0 does not read C.
template <typename TC>
void scale_C(int M, int N, float beta, TC* C, int ldc) {
    for (int i = 0; i < M; ++i) {
        TC* c = C + (size_t)i * ldc;
        if (beta == 0.0f) {
            for (int j = 0; j < N; ++j) c[j] = from_float<TC>(0.0f);
        } else if (beta != 1.0f) {
            for (int j = 0; j < N; ++j) c[j] = from_float<TC>(beta * to_float(c[j]));
        }
    }
}

// Team-size policy: one thread for small problems, the caller's OpenMP setting otherwise.
inline int choose_threads(int M, int N, int K) {
#ifdef _OPENMP
    if ((double)M * N * K < PARALLEL_MIN_MACS) return 1;
    if (omp_in_parallel()) return 1;  // called from inside a team: don't nest
    return std::max(1, omp_get_max_threads());
#else
    (void)M, (void)N, (void)K;
    return 1;
#endif
}

// Work-sharing loop of the team, statically or dynamically scheduled. With Par ==
// false there is no team (the caller runs everything), and a plain loop avoids any
// OpenMP runtime cost for small GEMMs. With Par == true it is an orphaned `omp for`
// that binds to the team opened in Gemm::run; it ends with an implicit barrier.
template <bool Par, bool Dynamic, typename F> inline void team_for(int n, F&& f) {
    if constexpr (!Par) {
        for (int i = 0; i < n; ++i) f(i);
    } else if constexpr (Dynamic) {
#ifdef _OPENMP
#pragma omp for schedule(dynamic, 1)
#endif
        for (int i = 0; i < n; ++i) f(i);
    } else {
#ifdef _OPENMP
#pragma omp for schedule(static)
#endif
        for (int i = 0; i < n; ++i) f(i);
    }
}

template <typename TA, typename TB, typename TC> struct Gemm {
    // The problem.
    bool transA, transB;
    int M, N, K;
    float alpha;
    const TA* A;
    int lda;
    const TB* B;
    int ldb;
    float beta;
    TC* C;
    int ldc;

    // The blocking (see the top of the file).
    int nk = 0;              // number of K blocks
    int kc_std = 0;          // K block size (the last block may be shorter)
    int kgroup = 1;          // K blocks packed together into Bp (one barrier pair per group)
    bool use_scratch = false;
    int nthreads = 1;
    int nc_max = 0;          // B panel width, a multiple of NR
    int mo_max = 0;          // row block of the fp32 scratch (M without scratch)
    float* Bp = nullptr;     // packed B: kgroup blocks of kc_std x nc_max, shared by the team
    float* Zs = nullptr;     // fp32 scratch, mo_max x nc_max, shared by the team
    size_t ap_floats = 0;    // size of each thread's packed A block

    void plan() {
        // K blocking: a function of K alone (this is what fixes the summation order).
        // Blocks are as even as possible so no tiny tail block wastes a pass over C.
        nk = ceil_div(K, KC_MAX);
        kc_std = ceil_div(K, nk);
        // A 2-byte C can only be rounded once if partial sums over K blocks live in fp32.
        use_scratch = !std::is_same<TC, float>::value && nk > 1;
        nthreads = choose_threads(M, N, K);
        nc_max = std::min(NC_MAX, ceil_div(N, NR) * NR);
        // When the panel is narrow, pack several K blocks of it at once: fewer
        // barriers, and each C tile stays in cache over several K blocks.
        kgroup = std::max(1, std::min(nk, (int)((size_t)KC_MAX * NC_MAX / ((size_t)kc_std * nc_max))));
        mo_max = M;
        if (use_scratch) {
            // Equal row blocks (multiples of MR) that fit the scratch; B is packed once per block.
            const int cap = std::max(MR, (int)(SCRATCH_FLOATS / nc_max) / MR * MR);
            const int nblocks = ceil_div(M, cap);
            mo_max = std::min(M, ceil_div(ceil_div(M, nblocks), MR) * MR);
        }
        // Shared buffers come from the calling thread; team threads only use them.
        Bp = thread_buffer(BUF_B, (size_t)kgroup * kc_std * nc_max);
        Zs = use_scratch ? thread_buffer(BUF_Z, (size_t)std::min(mo_max, M) * nc_max) : nullptr;
        ap_floats = (size_t)MC_MAX * kc_std;
    }

    // Executed by every thread of the team (or by the caller alone when Par == false).
    template <bool Par> void run_team() const {
        float* Ap = thread_buffer(BUF_A, ap_floats);  // this thread's A block
        const size_t bstride = (size_t)kc_std * nc_max;  // one K block of the B panel

        for (int jc = 0; jc < N; jc += nc_max) {
            const int nc = std::min(nc_max, N - jc);
            const int ns = ceil_div(nc, NR);  // NR slivers in this panel

            for (int io = 0; io < M; io += mo_max) {
                const int mo = std::min(mo_max, M - io);
                const int ms = ceil_div(mo, MR);  // MR slivers in this row block

                // Output tiles: nbm row groups x nbn column groups (sliver ranges, as
                // even as possible), enough to keep every thread busy. The grouping
                // never changes the arithmetic.
                int nbm = ceil_div(ms, MC_MAX / MR);
                int nbn = 1;
                if (Par && nthreads > 1) {
                    if (nbm >= nthreads)
                        nbm = std::min(ms, ceil_div(nbm, nthreads) * nthreads);
                    else
                        nbn = std::min(ns, ceil_div(2 * nthreads, nbm));
                }
                const int ntiles = nbm * nbn;

                for (int p0 = 0; p0 < nk; p0 += kgroup) {
                    const int gn = std::min(kgroup, nk - p0);

                    // Pack the K blocks p0 .. p0+gn-1 of this B panel (shared).
                    team_for<Par, false>(gn * ns, [&](int item) {
                        const int g = item / ns, sl = item % ns;
                        const int k0 = (p0 + g) * kc_std, kc = std::min(kc_std, K - k0);
                        pack_B_sliver(transB, B, ldb, k0, kc, jc + sl * NR, std::min(NR, nc - sl * NR),
                                      Bp + g * bstride + (size_t)sl * NR * kc);
                    });
                    // (barrier: Bp is complete)

                    team_for<Par, true>(ntiles, [&](int t) {
                        const int bm = t / nbn, bn = t % nbn;
                        const int r_begin = (int)((long long)bm * ms / nbm) * MR;
                        const int r_end = std::min(mo, (int)((long long)(bm + 1) * ms / nbm) * MR);
                        const int s_begin = (int)((long long)bn * ns / nbn);
                        const int s_end = (int)((long long)(bn + 1) * ns / nbn);
                        for (int rb = r_begin; rb < r_end; rb += MC_MAX) {
                            const int mc = std::min(MC_MAX, r_end - rb);
                            const int i0 = io + rb;  // first row of C in this block
                            for (int g = 0; g < gn; ++g) {  // K blocks strictly in order
                                const int p = p0 + g;
                                const int k0 = p * kc_std, kc = std::min(kc_std, K - k0);
                                pack_A(transA, A, lda, i0, mc, k0, kc, Ap);
                                // Prefetch this tile's A for K block p+1 while computing block p.
                                LinePrefetcher pf;
                                if (p + 1 < nk) {
                                    const int k1 = k0 + kc, kc1 = std::min(kc_std, K - k1);
                                    const int nsteps = (s_end - s_begin) * ceil_div(mc, MR);
                                    if (transA)
                                        pf.start(A + (size_t)k1 * lda + i0, (size_t)lda * sizeof(TA), kc1,
                                                 (size_t)mc * sizeof(TA), nsteps);
                                    else
                                        pf.start(A + (size_t)i0 * lda + k1, (size_t)lda * sizeof(TA), mc,
                                                 (size_t)kc1 * sizeof(TA), nsteps);
                                }
                                compute_block(Ap, Bp + g * bstride, kc, p, i0, io, mc, jc, nc, s_begin, s_end, pf);
                            }
                        }
                    });
                    // (barrier: nobody still reads Bp or writes this group's results)
                }
            }
        }
    }

    // One K block of one tile: rows [i0, i0+mc) of C, slivers [s_begin, s_end) of
    // the panel at column jc. B slivers in the outer loop (one stays in L1), A slivers
    // in the inner loop (the A block stays in L2).
    void compute_block(const float* Ap, const float* Bblk, int kc, int p, int i0, int io, int mc, int jc,
                       int nc, int s_begin, int s_end, LinePrefetcher& pf) const {
        const bool first = p == 0, last = p == nk - 1;
        for (int sl = s_begin; sl < s_end; ++sl) {
            const float* bs = Bblk + (size_t)sl * NR * kc;
            const int j = sl * NR;  // column within the panel
            const int nr = std::min(NR, nc - j);
            for (int r = 0; r < mc; r += MR) {
                const float* as = Ap + (size_t)r * kc;
                const int mr = std::min(MR, mc - r);
                pf.step();
                if (!use_scratch || last) {
                    // Start fetching the C tile PF_TILES tiles ahead (for writing): with
                    // a short K the kernel is otherwise bound by C's cache misses.
                    int r2 = r + PF_TILES * MR, j2 = j;
                    if (r2 >= mc) r2 -= ((mc + MR - 1) / MR) * MR, j2 += NR;
                    if (r2 >= 0 && r2 < mc && j2 < nc) {
                        const TC* c2 = C + (size_t)(i0 + r2) * ldc + jc + j2;
                        for (int i = 0; i < std::min(MR, mc - r2); ++i) __builtin_prefetch(c2 + (size_t)i * ldc, 1, 3);
                    }
                }
                TC* c = C + (size_t)(i0 + r) * ldc + jc + j;
                if (!use_scratch) {
                    // First (or only) K block: C = alpha*acc + beta*C. Later blocks
                    // (fp32 C only): C = C + alpha*acc.
                    if (first)
                        micro_kernel<TC>(kc, as, bs, {c, ldc, nullptr, 0, alpha, beta, beta != 0.0f}, mr, nr);
                    else
                        micro_kernel<TC>(kc, as, bs, {c, ldc, c_as_float(c), ldc, alpha, 1.0f, false}, mr, nr);
                } else {
                    // 2-byte C over several K blocks: partial sums in the fp32 scratch;
                    // the last block adds beta*C and rounds to TC, once.
                    float* z = Zs + (size_t)(i0 - io + r) * nc + j;
                    if (first)
                        micro_kernel<float>(kc, as, bs, {z, nc, nullptr, 0, alpha, 1.0f, false}, mr, nr);
                    else if (!last)
                        micro_kernel<float>(kc, as, bs, {z, nc, z, nc, alpha, 1.0f, false}, mr, nr);
                    else
                        micro_kernel<TC>(kc, as, bs, {c, ldc, z, nc, alpha, beta, beta != 0.0f}, mr, nr);
                }
            }
        }
    }

    // For fp32 C (the only case that accumulates into C itself) C is its own fp32
    // partial sum; for other types this is never called.
    static const float* c_as_float(const TC* c) {
        if constexpr (std::is_same<TC, float>::value) return c;
        else return nullptr;
    }

    void run() {
        plan();
        if (nthreads <= 1) {
            run_team<false>();
            return;
        }
#ifdef _OPENMP
#pragma omp parallel num_threads(nthreads)
#endif
        run_team<true>();
    }
};

}  // namespace gemm_cpu_detail

template <typename TA, typename TB, typename TC>
void gemm_cpu(bool transA, bool transB, int M, int N, int K, float alpha,
              const TA* A, int lda, const TB* B, int ldb, float beta, TC* C, int ldc) {
    if (M <= 0 || N <= 0) return;
    if (K <= 0 || alpha == 0.0f) {
        gemm_cpu_detail::scale_C(M, N, beta, C, ldc);
        return;
    }
    gemm_cpu_detail::Gemm<TA, TB, TC>{transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc}.run();
}

GEMM_CPU_FOR_EACH_TYPES(GEMM_CPU_INSTANCE, )

const char* gemm_cpu_kernel() {
#ifdef GEMM_CPU_AVX2
    return "AVX2/FMA";
#else
    return "portable";
#endif
}
