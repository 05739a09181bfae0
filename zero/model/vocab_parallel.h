// The vocabulary-parallel embedding and LM-head loss of a tensor group: rank p
// of t holds rows [p*Vp/t, (p+1)*Vp/t) of wte, so its logits are those columns
// of (BT, Vp). Neither the embedding table nor the logits are ever gathered:
//
//   embedding   each rank looks up the tokens it holds (zeros for the others),
//               rank 0 adds the positions, and an all-reduce sums the group;
//   loss        the row's max is all-gathered (one float per row and rank), the
//               sums of exp(logit - max) and the target's logit are all-reduced
//               (two floats per row), and each rank forms its own columns of
//               dlogits = (softmax - onehot) * dloss from them.
//
// The kernels between the collectives are kernels/cpu/vocab_parallel.h's.
#pragma once

#include "kernels/kernels.h"
#include "zero/base/dtype.h"
#include "zero/comm/comm.h"

// fp32 scratch the loss needs for BT rows in a group of t: (t + 3) * BT.
inline size_t vocab_parallel_scratch_floats(size_t BT, int t) { return (t + 3) * BT; }

// out (B,T,C) = wte[tokens] + wpe[position], from each rank's rows of wte.
template <typename T>
void vocab_parallel_embedding(const KernelCtx& ctx, Comm& tp, T* out, const int* tokens, const T* wte_local,
                              const T* wpe, int B, int T_, int C, int Vp) {
    int Vl = Vp / tp.world;
    encoder_forward_vocab(ctx, out, tokens, wte_local, wpe, B, T_, C, Vl * tp.rank, Vl, tp.rank == 0);
    tp.all_reduce_sum(out, (size_t)B * T_ * C, dtype_of<T>::value, ctx.stream);
}

// losses (BT) = cross-entropy of each row over the real vocabulary (every rank
// gets the same); with dloss != 0 the local logits (BT, Vp/t) become dlogits.
template <typename T>
void vocab_parallel_cross_entropy(const KernelCtx& ctx, Comm& tp, T* logits, float* losses, const int* targets,
                                  int BT, int V, int Vp, float dloss, float* scratch) {
    const int t = tp.world, Vl = Vp / t, v0 = Vl * tp.rank;
    float* gathered = scratch;                  // (t, BT): every rank's row maxima
    float* global_max = scratch + (size_t)t * BT;  // (BT)
    float* sum_exp = global_max + BT;           // (BT), then the target's logit (BT): one all-reduce
    float* target_logit = sum_exp + BT;
    float* my_max = gathered + (size_t)tp.rank * BT;
    vocab_parallel_local_stats(ctx, my_max, target_logit, logits, targets, BT, Vl, v0, V);
    tp.all_gather(my_max, gathered, BT, DType::F32, ctx.stream);  // in place
    vocab_parallel_sum_exp(ctx, global_max, sum_exp, gathered, logits, t, BT, Vl, v0, V);
    tp.all_reduce_sum(sum_exp, 2 * (size_t)BT, DType::F32, ctx.stream);
    vocab_parallel_finish(ctx, logits, losses, targets, global_max, sum_exp, target_logit, BT, Vl, v0, V, dloss);
}
