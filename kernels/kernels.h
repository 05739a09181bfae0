// The kernels the model and the ZeRO engine call, one thin dispatcher each:
// the CUDA build launches the family in kernels/<family>.cuh on the rank's
// stream; the CPU build runs the CPU twin in kernels/cpu/<family>.h, which is
// also the reference every CUDA kernel is tested against. Every launch goes
// through launch(): it names its kind and shape (the step-time model's cost
// key) and what it reads and writes, so checking mode can check its order
// (zero/base/stream_check.h) and a dry run record it instead of running it
// (zero/base/ops.h).
//
// Conventions: shapes in the comments, row-major; (BT) means B*T rows. Outputs
// named d* that say "accumulate" add into what is there (gradients accumulate
// over micro-steps); the others overwrite.
#pragma once

#include "zero/base/backend.h"
#include "zero/base/variants.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/classifier.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/gelu.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cpu/vocab_parallel.h"
#include "zero/base/memory.h"

#ifdef ZERO_CUDA
#include "kernels/adamw.cuh"
#include "kernels/attention.cuh"
#include "kernels/attention_cudnn.cuh"
#include "kernels/classifier.cuh"
#include "kernels/encoder.cuh"
#include "kernels/gelu.cuh"
#include "kernels/layernorm.cuh"
#include "kernels/matmul.cuh"
#include "kernels/reduce.cuh"
#include "kernels/vocab_parallel.cuh"
// compiled once each, in kernels/instances/*.cu: here only declared
#include "kernels/cuda_instances.h"
ZERO_FOR_EACH_DTYPE(ZERO_ENCODER_INSTANCE, extern)
ZERO_FOR_EACH_DTYPE(ZERO_LAYERNORM_INSTANCE, extern)
ZERO_FOR_EACH_DTYPE(ZERO_MATMUL_INSTANCE, extern)
ZERO_FOR_EACH_DTYPE(ZERO_ATTENTION_INSTANCE, extern)
ZERO_FOR_EACH_DTYPE(ZERO_CLASSIFIER_INSTANCE, extern)
ZERO_FOR_EACH_DTYPE(ZERO_VOCAB_PARALLEL_INSTANCE, extern)
ZERO_FOR_EACH_DTYPE(ZERO_OPTIMIZER_INSTANCE, extern)
#define ZERO_DISPATCH(cuda_call, cpu_call) cuda_call
#define ZERO_TWIN(name, ...) name##_cuda(ctx, __VA_ARGS__)
#else
#define ZERO_DISPATCH(cuda_call, cpu_call) cpu_call
#define ZERO_TWIN(name, ...) name##_cpu(__VA_ARGS__)
#endif
// ZERO_TWIN(name, args): name_cuda(ctx, args) or its CPU twin name_cpu(args), for twins of the same arguments

// kind: the op's name, typed by a compute dtype of dtype_bytes (0: untyped:
// "matmul_fwd" and 2 -> "matmul_fwd_16"); dims: its shape; acc: a braced list
// of accesses (Accesses' default), or a vector where their number depends on the data.
template <typename Run, typename Accesses = std::initializer_list<Access>>
void launch(const KernelCtx& ctx, const char* kind, int dtype_bytes, std::initializer_list<long> dims,
            const Accesses& acc, Run&& run) {
    check_on(ctx.stream, kind, acc);
    if (!tl_recorder) return run();
    StepOp op = step_op(OpKind::Kernel, stream_lane(ctx.stream),
                        std::string(kind) + (dtype_bytes == 0 ? "" : dtype_bytes == 4 ? "_f32" : "_16"));
    op.dims = dims, op.acc.assign(acc.begin(), acc.end());
    perform(op, ctx.stream, run, [s = ctx.stream] { stream_sync(s); });  // a capture runs it again, finished on its stream
}

// out = wte[tokens] + wpe[position]
template <typename T>
void encoder_forward(const KernelCtx& ctx, T* out /* (B,T,C) */, const int* tokens /* (B,T) */,
                     const T* wte /* (Vp,C) */, const T* wpe /* (maxT,C) */, int B, int T_, int C, int Vp) {
    launch(ctx, "encoder_fwd", sizeof(T), {B, T_, C, Vp},
           {writes(out, (size_t)B * T_ * C), reads(tokens, (size_t)B * T_), reads(wte, (size_t)Vp * C),
            reads(wpe, (size_t)T_ * C)},
           [=] { ZERO_TWIN(encoder_forward, out, tokens, wte, wpe, B, T_, C); });
}

// The encoder backward's longest run of a token's positions summed alone (0:
// any; ZERO_VARIANTS=encoder_split cuts longer ones, kernels/cpu/encoder.h).
inline int encoder_split_run() { return variant_on(Variant::EncoderSplit) ? ENCODER_SPLIT_RUN : 0; }

// dwte, dwpe accumulate. tokens_host is the same batch on the host (the CUDA
// kernel buckets positions by token there, for a deterministic sum).
template <typename T>
void encoder_backward(const KernelCtx& ctx, T* dwte, T* dwpe, const T* dout /* (B,T,C) */, const int* tokens,
                      const int* tokens_host, int B, int T_, int C, int Vp) {
    const int split = encoder_split_run();
    launch(ctx, "encoder_bwd", sizeof(T), {B, T_, C, Vp},
           {writes(dwte, (size_t)Vp * C), writes(dwpe, (size_t)T_ * C), reads(dout, (size_t)B * T_ * C),
            reads(tokens, (size_t)B * T_)},
           [=] {
               ZERO_DISPATCH(encoder_backward_cuda(ctx, dwte, dwpe, dout, tokens, tokens_host, B, T_, C, split),
                             encoder_backward_cpu(dwte, dwpe, dout, tokens_host, B, T_, C, 0, INT_MAX, split));
           });
}

template <typename T>
void layernorm_forward(const KernelCtx& ctx, T* out /* (N,C) */, float* mean, float* rstd /* (N) */,
                       const T* inp /* (N,C) */, const T* weight, const T* bias /* (C) */, int N, int C) {
    launch(ctx, "layernorm_fwd", sizeof(T), {N, C},
           {writes(out, (size_t)N * C), writes(mean, (size_t)N), writes(rstd, (size_t)N), reads(inp, (size_t)N * C),
            reads(weight, (size_t)C), reads(bias, (size_t)C)},
           [=] { ZERO_TWIN(layernorm_forward, out, mean, rstd, inp, weight, bias, N, C); });
}

// residual = inp1 + inp2; out = layernorm(residual)
template <typename T>
void residual_layernorm_forward(const KernelCtx& ctx, T* residual, T* out /* (N,C) */, float* mean,
                                float* rstd /* (N) */, const T* inp1, const T* inp2 /* (N,C) */, const T* weight,
                                const T* bias /* (C) */, int N, int C) {
    launch(
        ctx, "residual_layernorm_fwd", sizeof(T), {N, C},
        {writes(residual, (size_t)N * C), writes(out, (size_t)N * C), writes(mean, (size_t)N), writes(rstd, (size_t)N),
         reads(inp1, (size_t)N * C), reads(inp2, (size_t)N * C), reads(weight, (size_t)C), reads(bias, (size_t)C)},
        [=] { ZERO_TWIN(residual_layernorm_forward, residual, out, mean, rstd, inp1, inp2, weight, bias, N, C); });
}

// out = a + b (a residual connection)
template <typename T>
void residual_forward(const KernelCtx& ctx, T* out, const T* a, const T* b, size_t n) {
    launch(ctx, "residual_fwd", sizeof(T), {(long)n}, {writes(out, n), reads(a, n), reads(b, n)},
           [=] { ZERO_TWIN(residual_forward, out, a, b, n); });
}

// dinp, dweight, dbias accumulate
template <typename T>
void layernorm_backward(const KernelCtx& ctx, T* dinp /* (N,C) */, T* dweight, T* dbias /* (C) */, const T* dout,
                        const T* inp /* (N,C) */, const T* weight /* (C) */, const float* mean,
                        const float* rstd /* (N) */, int N, int C) {
    launch(
        ctx, "layernorm_bwd", sizeof(T), {N, C},
        {writes(dinp, (size_t)N * C), writes(dweight, (size_t)C), writes(dbias, (size_t)C), reads(dout, (size_t)N * C),
         reads(inp, (size_t)N * C), reads(weight, (size_t)C), reads(mean, (size_t)N), reads(rstd, (size_t)N)},
        [=] { ZERO_TWIN(layernorm_backward, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C); });
}

// out = inp @ weight^T + bias. With gelu_pre != null the GELU is fused:
// gelu_pre receives the pre-activation and out = gelu(gelu_pre).
template <typename T>
void matmul_forward(const KernelCtx& ctx, T* out /* (BT,OC) */, const T* inp /* (BT,C) */, const T* weight /* (OC,C) */,
                    const T* bias /* (OC) or null */, int BT, int C, int OC, T* gelu_pre /* (BT,OC) or null */) {
    launch(ctx, gelu_pre ? "matmul_fwd_gelu" : "matmul_fwd", sizeof(T), {BT, C, OC, bias ? 1 : 0},
           {writes(out, (size_t)BT * OC), writes(gelu_pre, (size_t)BT * OC), reads(inp, (size_t)BT * C),
            reads(weight, (size_t)OC * C), reads(bias, (size_t)OC)},
           [=] { ZERO_TWIN(matmul_forward, out, inp, weight, bias, BT, C, OC, gelu_pre); });
}

// dinp = dout @ weight (overwritten; times gelu'(gelu_pre) when gelu_pre != null,
// fusing the backward of a GELU that produced this matmul's input);
// dweight += dout^T @ inp; dbias += column sums of dout (when not null).
template <typename T>
void matmul_backward(const KernelCtx& ctx, T* dinp /* (BT,C) */, T* dweight /* (OC,C) */, T* dbias /* (OC) */,
                     const T* dout /* (BT,OC) */, const T* inp /* (BT,C) */, const T* weight /* (OC,C) */, int BT,
                     int C, int OC, const T* gelu_pre /* (BT,C) or null */) {
    launch(ctx, gelu_pre ? "matmul_bwd_gelu" : "matmul_bwd", sizeof(T), {BT, C, OC, dbias ? 1 : 0},
           {writes(dinp, (size_t)BT * C), writes(dweight, (size_t)OC * C), writes(dbias, (size_t)OC),
            reads(dout, (size_t)BT * OC), reads(inp, (size_t)BT * C), reads(weight, (size_t)OC * C),
            reads(gelu_pre, (size_t)BT * C)},
           [=] {
               ZERO_DISPATCH(matmul_backward_cuda(ctx, dinp, dweight, dbias, dout, inp, weight, BT, C, OC, gelu_pre,
                                                  variant_on(Variant::DbiasBlocks)),
                             matmul_backward_cpu(dinp, dweight, dbias, dout, inp, weight, BT, C, OC, gelu_pre));
           });
}

template <typename T>
void gelu_forward(const KernelCtx& ctx, T* out, const T* inp, size_t n) {
    launch(ctx, "gelu_fwd", sizeof(T), {(long)n}, {writes(out, n), reads(inp, n)},
           [=] { ZERO_TWIN(gelu_forward, out, inp, n); });
}

// causal self-attention; lse keeps each row's log-sum-exp for the backward pass
template <typename T>
void attention_forward(const KernelCtx& ctx, T* out /* (B,T,C) */, float* lse /* (B,NH,T) */,
                       const T* qkv /* (B,T,3C) */, int B, int T_, int C, int NH) {
    launch(ctx, "attention_fwd", sizeof(T), {B, T_, C, NH},
           {writes(out, (size_t)B * T_ * C), writes(lse, (size_t)B * NH * T_), reads(qkv, (size_t)B * T_ * 3 * C)},
           [=] {
#ifdef ZERO_CUDNN
               if (ctx.cudnn) return attention_cudnn_forward(ctx, out, lse, qkv, B, T_, C, NH);
#endif
               ZERO_TWIN(attention_forward, out, lse, qkv, B, T_, C, NH);
           });
}

// dqkv overwritten
template <typename T>
void attention_backward(const KernelCtx& ctx, T* dqkv /* (B,T,3C) */, const T* dout /* (B,T,C) */,
                        const T* qkv /* (B,T,3C) */, const T* out /* (B,T,C) */, const float* lse /* (B,NH,T) */, int B,
                        int T_, int C, int NH) {
    launch(ctx, "attention_bwd", sizeof(T), {B, T_, C, NH},
           {writes(dqkv, (size_t)B * T_ * 3 * C), reads(dout, (size_t)B * T_ * C), reads(qkv, (size_t)B * T_ * 3 * C),
            reads(out, (size_t)B * T_ * C), reads(lse, (size_t)B * NH * T_)},
           [=] {
#ifdef ZERO_CUDNN
               if (ctx.cudnn) return attention_cudnn_backward(ctx, dqkv, dout, qkv, out, lse, B, T_, C, NH);
#endif
               ZERO_TWIN(attention_backward, dqkv, dout, qkv, out, lse, B, T_, C, NH);
           });
}

// losses = cross-entropy per row; if dloss != 0 the logits become dlogits * dloss
template <typename T>
void fused_classifier(const KernelCtx& ctx, T* logits /* (BT,Vp) */, float* losses /* (BT) */,
                      const int* targets /* (BT) */, int BT, int V, int Vp, float dloss) {
    launch(ctx, "classifier", sizeof(T), {BT, Vp},
           {writes(logits, (size_t)BT * Vp), writes(losses, (size_t)BT), reads(targets, (size_t)BT)}, [=] {
               ZERO_DISPATCH(fused_classifier_cuda(ctx, logits, losses, targets, BT, V, Vp, dloss,
                                                   variant_on(Variant::FastExpClassifier)),
                             fused_classifier_cpu(logits, losses, targets, BT, V, Vp, dloss));
           });
}

// --- the vocabulary-parallel embedding and cross-entropy (tensor parallelism) --
// A rank holds Vl padded-vocabulary rows of wte from row v0 (kernels/cpu/vocab_parallel.h,
// kernels/vocab_parallel.cuh).

template <typename T>
void encoder_forward_vocab(const KernelCtx& ctx, T* out /* (B,T,C) */, const int* tokens /* (B,T) */,
                           const T* wte_local /* (Vl,C) */, const T* wpe /* (maxT,C) */, int B, int T_, int C, int v0,
                           int Vl, bool add_wpe) {
    launch(ctx, "encoder_fwd_vocab", sizeof(T), {B, T_, C, Vl},
           {writes(out, (size_t)B * T_ * C), reads(tokens, (size_t)B * T_), reads(wte_local, (size_t)Vl * C),
            reads(add_wpe ? wpe : nullptr, (size_t)T_ * C)},
           [=] { ZERO_TWIN(encoder_forward_vocab, out, tokens, wte_local, wpe, B, T_, C, v0, Vl, add_wpe); });
}

// dwte_local accumulates the rows of the tokens this rank holds, dwpe every
// position's; tokens_host is the batch on the host
template <typename T>
void encoder_backward_vocab(const KernelCtx& ctx, T* dwte_local /* (Vl,C) */, T* dwpe /* (maxT,C) */,
                            const T* dout /* (B,T,C) */, const int* tokens_host, int B, int T_, int C, int v0, int Vl) {
    const int split = encoder_split_run();
    launch(ctx, "encoder_bwd_vocab", sizeof(T), {B, T_, C, Vl},
           {writes(dwte_local, (size_t)Vl * C), writes(dwpe, (size_t)T_ * C), reads(dout, (size_t)B * T_ * C)},
           [=] { ZERO_TWIN(encoder_backward_vocab, dwte_local, dwpe, dout, tokens_host, B, T_, C, v0, Vl, split); });
}

template <typename T>
void vocab_parallel_local_stats(const KernelCtx& ctx, float* row_max, float* target_logit /* (BT) */,
                                const T* logits /* (BT,Vl) */, const int* targets, int BT, int Vl, int v0, int V) {
    launch(ctx, "vocab_local_stats", sizeof(T), {BT, Vl},
           {writes(row_max, (size_t)BT), writes(target_logit, (size_t)BT), reads(logits, (size_t)BT * Vl),
            reads(targets, (size_t)BT)},
           [=] { ZERO_TWIN(vocab_parallel_local_stats, row_max, target_logit, logits, targets, BT, Vl, v0, V); });
}

template <typename T>
void vocab_parallel_sum_exp(const KernelCtx& ctx, float* global_max, float* sum_exp /* (BT) */,
                            const float* gathered_max /* (t,BT) */, const T* logits /* (BT,Vl) */, int t, int BT,
                            int Vl, int v0, int V) {
    launch(ctx, "vocab_sum_exp", sizeof(T), {BT, Vl, t},
           {writes(global_max, (size_t)BT), writes(sum_exp, (size_t)BT), reads(gathered_max, (size_t)t * BT),
            reads(logits, (size_t)BT * Vl)},
           [=] { ZERO_TWIN(vocab_parallel_sum_exp, global_max, sum_exp, gathered_max, logits, t, BT, Vl, v0, V); });
}

template <typename T>
void vocab_parallel_finish(const KernelCtx& ctx, T* logits /* (BT,Vl) */, float* losses, const int* targets,
                           const float* global_max, const float* sum_exp, const float* target_logit /* (BT) */, int BT,
                           int Vl, int v0, int V, float dloss) {
    launch(ctx, "vocab_finish", sizeof(T), {BT, Vl},
           {writes(logits, (size_t)BT * Vl), writes(losses, (size_t)BT), reads(targets, (size_t)BT),
            reads(global_max, (size_t)BT), reads(sum_exp, (size_t)BT), reads(target_logit, (size_t)BT)},
           [=] {
               ZERO_TWIN(vocab_parallel_finish, logits, losses, targets, global_max, sum_exp, target_logit, BT, Vl, v0,
                         V, dloss);
           });
}

// AdamW over one contiguous piece; param (compute-dtype copy) may be null
template <typename Tg, typename Tp>
void adamw(const KernelCtx& ctx, float* master, float* m, float* v, const Tg* grad, Tp* param, size_t n,
           const AdamWStep& step, size_t full_offset) {
    launch(ctx, "adamw", sizeof(Tg), {(long)n},
           {writes(master, n), writes(m, n), writes(v, n), reads(grad, n), writes(param, n)},
           [=] { ZERO_TWIN(adamw, master, m, v, grad, param, n, step, full_offset); });
}

// --- the optimizer's pieces in one launch each (ZERO_VARIANTS=fused_optimizer)
// A table of OptPiece (kernels/cpu/adamw.h), on the device at `dev` and the
// same on the host (`pieces`: the checks' and the dry run's view of it).

// Sets each piece's first block of the launch the table serves, the norm's or
// AdamW's (whose states are at master, m, v), and whether its pointers allow
// the packed accesses; the launch's blocks (0 on the CPU, whose twins walk the table).
template <typename T>
unsigned lay_out_pieces(std::vector<OptPiece<T>>& pieces, bool norm, const float* master, const float* m,
                        const float* v) {
#ifdef ZERO_CUDA
    return lay_out_pieces_cuda(pieces, norm, master, m, v);
#else
    (void)pieces, (void)norm, (void)master, (void)m, (void)v;
    return 0;
#endif
}

// out[i] = sum of squares of piece i's gradient: what sumsq gives for it alone, bit for bit
template <typename T>
void sumsq_pieces(const KernelCtx& ctx, float* out /* (pieces) */, const OptPiece<T>* dev,
                  const std::vector<OptPiece<T>>& pieces, unsigned blocks) {
    const int np = (int)pieces.size();
    std::vector<Access> acc = {writes(out, np), reads(dev, np)};
    size_t n = 0;
    for (const OptPiece<T>& p : pieces) acc.push_back(reads(p.grad, p.n)), n += p.n;
    launch(ctx, "sumsq_fused", sizeof(T), {(long)n, np}, acc, [=] {
        ZERO_DISPATCH(sumsq_pieces_cuda(ctx, out, dev, np, blocks), sumsq_pieces_cpu(out, dev, np));
    });
}

// AdamW over every piece: what adamw gives piece by piece (s.weight_decay where a piece's decay is set)
template <typename T>
void adamw_pieces(const KernelCtx& ctx, const OptPiece<T>* dev, const std::vector<OptPiece<T>>& pieces, unsigned blocks,
                  float* master, float* m, float* v, const AdamWStep& s) {
    const int np = (int)pieces.size();
    std::vector<Access> acc = {reads(dev, np)};
    size_t n = 0;
    for (const OptPiece<T>& p : pieces) {
        acc.insert(acc.end(), {writes(master + p.states, p.n), writes(m + p.states, p.n), writes(v + p.states, p.n),
                               reads(p.grad, p.n), writes(p.param, p.n)});
        n += p.n;
    }
    launch(ctx, "adamw_fused", sizeof(T), {(long)n, np}, acc, [=] {
        ZERO_DISPATCH(adamw_pieces_cuda(ctx, dev, np, blocks, master, m, v, s),
                      adamw_pieces_cpu(dev, np, master, m, v, s));
    });
}

// out[0] = the sum of x (n floats) in double, in a fixed tree
// (ZERO_VARIANTS=device_loss; kernels/cpu/reduce.h). out may be x's first 8 bytes.
inline void loss_total(const KernelCtx& ctx, double* out, const float* x, size_t n) {
    launch(ctx, "loss_total", 0, {(long)n}, {reads(x, n), writes(out, 1)},
           [=] { ZERO_DISPATCH(loss_total_cuda(ctx, out, x, n), *out = loss_total_cpu(x, n)); });
}

// out[0] = sum of squares of x (fp32 partial sums); a non-finite result means
// the piece holds an inf or NaN. `out` is device memory.
template <typename T>
void sumsq(const KernelCtx& ctx, float* out, const T* x, size_t n) {
    launch(ctx, "sumsq", sizeof(T), {(long)n}, {writes(out, 1), reads(x, n)},
           [=] { ZERO_DISPATCH(sumsq_cuda(ctx, out, x, n), *out = (float)sumsq_cpu(x, n)); });
}

// dst = sum over srcs (fp32 accumulation in order); srcs is a host array of device pointers
template <typename T>
void reduce_sum(const KernelCtx& ctx, T* dst, const T* const* srcs, int nsrc, size_t n) {
    check_on(ctx.stream, "reduce_sum", {writes(dst, n)});
    for (int i = 0; i < nsrc; i++) check_on(ctx.stream, "reduce_sum", {reads(srcs[i], n)});
    ZERO_TWIN(reduce_sum, dst, srcs, nsrc, n);
}

// dst += src (fp32 sum, rounded once), or dst = src when overwrite
template <typename T>
void accumulate(const KernelCtx& ctx, T* dst, const T* src, size_t n, bool overwrite) {
    launch(ctx, "accumulate", sizeof(T), {(long)n}, {writes(dst, n), reads(src, n)},
           [=] { ZERO_TWIN(accumulate, dst, src, n, overwrite); });
}

// sums (+)= losses: a step's per-token losses added up over its micro-steps (fp32)
inline void add_loss_sums(const KernelCtx& ctx, float* sums, const float* losses, size_t n, bool first) {
    launch(ctx, "loss_sum", 0, {(long)n}, {writes(sums, n), reads(losses, n)},
           [=] { ZERO_TWIN(accumulate, sums, losses, n, first); });
}

// ----------------------------------------------------------------------------
// The per-rank kernel context: its stream and, on the GPU, the library handles
// and workspaces the kernels need, all from the rank's accounting allocator.

// Bytes of kernel workspace for micro-batches of BT tokens (0 on the CPU
// build); cudnn_seq_len > 0: the attention is cuDNN's, on sequences of that length.
inline size_t kernel_workspace_bytes(size_t BT, int channels, int num_heads, int cudnn_seq_len = 0) {
#ifdef ZERO_CUDA
    const size_t own = own_kernel_workspace_bytes(BT, channels, num_heads, encoder_split_run(),
                                                  variant_on(Variant::DbiasBlocks));
    const size_t cudnn = cudnn_seq_len > 0 ? attention_cudnn_workspace_bytes(BT / cudnn_seq_len, cudnn_seq_len, num_heads) : 0;
    return CUBLASLT_WORKSPACE_BYTES + std::max(own, cudnn);
#else
    (void)BT, (void)channels, (void)num_heads, (void)cudnn_seq_len;
    return 0;
#endif
}

inline KernelCtx create_kernel_ctx(MemoryAccountant& mem, size_t BT, int channels, int num_heads,
                                   int cudnn_seq_len = 0) {
    KernelCtx ctx{.stream = stream_create(Lane::Compute, "the compute stream")};
#ifdef ZERO_CUDA
    if (!dry_recorder()) cublasCheck(cublasLtCreate(&ctx.lt));  // (a dry run launches nothing)
    ctx.lt_workspace_bytes = CUBLASLT_WORKSPACE_BYTES;
    ctx.lt_workspace =
        mem.allocate(ctx.lt_workspace_bytes, MemKind::Scratch, Arena::Device, "cublaslt_workspace", false);
    ctx.workspace_bytes = kernel_workspace_bytes(BT, channels, num_heads, cudnn_seq_len) - CUBLASLT_WORKSPACE_BYTES;
    ctx.workspace = mem.allocate(ctx.workspace_bytes, MemKind::Scratch, Arena::Device, "kernel_workspace", false);
#ifdef ZERO_CUDNN
    if (cudnn_seq_len > 0 && !dry_recorder()) ctx.cudnn = new CudnnAttention();
#endif
#else
    (void)mem, (void)BT, (void)channels, (void)num_heads, (void)cudnn_seq_len;
#endif
    return ctx;
}

inline void destroy_kernel_ctx(KernelCtx& ctx) {
#ifdef ZERO_CUDNN
    delete ctx.cudnn;
#endif
#ifdef ZERO_CUDA
    if (ctx.lt) cublasCheck(cublasLtDestroy(ctx.lt));
#endif
    stream_destroy(ctx.stream);
}
