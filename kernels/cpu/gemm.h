// A deterministic, multithreaded CPU GEMM for the CPU build of the trainer
// (gemm_cpu below): fp32 arithmetic whatever the element types, and results
// bit-identical for any OpenMP thread count (kernels/cpu/gemm.cpp says why).
//
// Thread safety: no global mutable state. Packing buffers are thread_local (the
// shared B panel and scratch belong to the calling thread, A blocks to each team
// thread), so several std::threads may call gemm_cpu at once, each with its own
// OpenMP team.
//
// The definitions (blocking, packing, the micro-kernels) are in
// kernels/cpu/gemm.cpp, compiled once for the instantiations listed below. Its
// own flags decide the rest: -fopenmp for threads (else serial), AVX2 and FMA
// in the target for the AVX2/FMA micro-kernel (else a portable one).
#pragma once

#include "zero/base/dtype.h"

// C[M,N] = alpha * op(A)[M,K] @ op(B)[K,N] + beta * C      (all row-major)
// op(A) = A stored (M x K, leading dim lda)  or, if transA, A stored (K x M, lda) and transposed.
// op(B) = B stored (K x N, ldb)              or, if transB, B stored (N x K, ldb) and transposed.
// beta == 0 means C is not read (it may hold garbage/NaN). alpha == 0 or K == 0 means
// A and B are not read and C = beta * C.
// Element types: TA, TB, TC each in {float, bf16, f16}; loads widen to fp32, all arithmetic is fp32,
// and each C element is rounded to TC exactly once at the end.
// Results are bit-identical for any OpenMP thread count.
template <typename TA, typename TB, typename TC>
void gemm_cpu(bool transA, bool transB, int M, int N, int K, float alpha, const TA* A, int lda, const TB* B, int ldb,
              float beta, TC* C, int ldc);

// The (TA, TB, TC) combinations kernels/cpu/gemm.cpp instantiates, listed once:
// the trainer's (one dtype throughout) and the mixed ones the tests check. A
// combination not listed here fails at link time, naming it.
#define GEMM_CPU_FOR_EACH_TYPES(X, P)                                                                      \
    X(P, float, float, float) X(P, bf16, bf16, bf16) X(P, f16, f16, f16)                                   \
    X(P, bf16, bf16, float) X(P, f16, f16, float) X(P, float, bf16, bf16) X(P, bf16, float, float)         \
    X(P, float, float, bf16) X(P, float, float, f16)
#define GEMM_CPU_INSTANCE(P, TA, TB, TC)                                                                   \
    P template void gemm_cpu<TA, TB, TC>(bool, bool, int, int, int, float, const TA*, int, const TB*, int, \
                                         float, TC*, int);
GEMM_CPU_FOR_EACH_TYPES(GEMM_CPU_INSTANCE, extern)

// Which micro-kernel gemm.cpp was compiled with: "AVX2/FMA" or "portable"
// (decided by the flags gemm.cpp itself was built with, not the caller's).
const char* gemm_cpu_kernel();
