// The instantiations of every CUDA launcher the trainer calls, listed once.
// Each kernel family is compiled in its own translation unit
// (kernels/instances/<family>.cu, which expands its list with an empty prefix:
// explicit instantiation), so the families compile in parallel and an edit to
// the engine recompiles none of them; kernels/kernels.h expands every list with
// `extern`, so the trainer's translation unit instantiates no kernel at all.
//
// A launcher used with a type not listed here fails at link time, naming it.
#pragma once

#define ZERO_FOR_EACH_DTYPE(X, P) X(P, float) X(P, bf16) X(P, f16)

#define ZERO_ENCODER_INSTANCE(P, T)                                                                             \
    P template void encoder_forward_cuda<T>(const KernelCtx&, T*, const int*, const T*, const T*, int, int, int); \
    P template void encoder_backward_cuda<T>(const KernelCtx&, T*, T*, const T*, const int*, const int*, int, int,  \
                                             int, int);

#define ZERO_LAYERNORM_INSTANCE(P, T)                                                                             \
    P template void layernorm_forward_cuda<T>(const KernelCtx&, T*, float*, float*, const T*, const T*, const T*,  \
                                              int, int);                                                         \
    P template void residual_layernorm_forward_cuda<T>(const KernelCtx&, T*, T*, float*, float*, const T*,         \
                                                       const T*, const T*, const T*, int, int);                  \
    P template void residual_forward_cuda<T>(const KernelCtx&, T*, const T*, const T*, size_t);                   \
    P template void layernorm_backward_cuda<T>(const KernelCtx&, T*, T*, T*, const T*, const T*, const T*,        \
                                               const float*, const float*, int, int, int, int);

#define ZERO_MATMUL_INSTANCE(P, T)                                                                                \
    P template void matmul_forward_cuda<T>(const KernelCtx&, T*, const T*, const T*, const T*, int, int, int, T*); \
    P template void matmul_backward_cuda<T>(const KernelCtx&, T*, T*, T*, const T*, const T*, const T*, int, int,  \
                                            int, const T*, bool);                                                \
    P template void gelu_forward_cuda<T>(const KernelCtx&, T*, const T*, size_t);

#define ZERO_ATTENTION_INSTANCE(P, T)                                                                             \
    P template void attention_forward_cuda<T>(const KernelCtx&, T*, float*, const T*, int, int, int, int);        \
    P template void attention_backward_cuda<T>(const KernelCtx&, T*, const T*, const T*, const T*, const float*,  \
                                               int, int, int, int);

#define ZERO_CLASSIFIER_INSTANCE(P, T)                                                                            \
    P template void fused_classifier_cuda<T>(const KernelCtx&, T*, float*, const int*, int, int, int, float, bool);

#define ZERO_VOCAB_PARALLEL_INSTANCE(P, T)                                                                        \
    P template void encoder_forward_vocab_cuda<T>(const KernelCtx&, T*, const int*, const T*, const T*, int, int, \
                                                  int, int, int, bool);                                          \
    P template void encoder_backward_vocab_cuda<T>(const KernelCtx&, T*, T*, const T*, const int*, int, int, int,  \
                                                   int, int, int);                                               \
    P template void vocab_parallel_local_stats_cuda<T>(const KernelCtx&, float*, float*, const T*, const int*, int, \
                                                       int, int, int);                                           \
    P template void vocab_parallel_sum_exp_cuda<T>(const KernelCtx&, float*, float*, const float*, const T*, int,  \
                                                   int, int, int, int);                                          \
    P template void vocab_parallel_finish_cuda<T>(const KernelCtx&, T*, float*, const int*, const float*,          \
                                                  const float*, const float*, int, int, int, int, float);

#define ZERO_OPTIMIZER_INSTANCE(P, T)                                                                             \
    P template void adamw_cuda<T, T>(const KernelCtx&, float*, float*, float*, const T*, T*, size_t,              \
                                     const AdamWStep&, size_t);                                                  \
    P template void sumsq_cuda<T>(const KernelCtx&, float*, const T*, size_t);                                    \
    P template void adamw_pieces_cuda<T>(const KernelCtx&, const OptPiece<T>*, int, unsigned, float*, float*,       \
                                         float*, const AdamWStep&);                                              \
    P template void sumsq_pieces_cuda<T>(const KernelCtx&, float*, const OptPiece<T>*, int, unsigned);             \
    P template void reduce_sum_cuda<T>(const KernelCtx&, T*, const T* const*, int, size_t);                       \
    P template void accumulate_cuda<T>(const KernelCtx&, T*, const T*, size_t, bool);
