// Causal self-attention on the GPU: fused, flash-style forward and backward.
//
// Semantics are those of the CPU twin in kernels/cpu/attention.h: qkv is
// (B, T, 3C) with q | k | v blocks of C channels, head h owns channels
// [h*hs, (h+1)*hs); out is (B, T, C); lse is (B, NH, T), the natural
// log-sum-exp of each row's scaled causal scores (scale 1/sqrt(hs)); the
// backward pass overwrites dqkv. The T x T score matrix is never stored.
//
// Two implementations, each with a forward and a backward:
//
//  * Tensor cores (bf16 / fp16, hs in {32, 64, 128}, 16-byte aligned tensors):
//    mma.sync.m16n8k16 with fp32 accumulation, ldmatrix fragment loads from
//    shared memory padded by 16 bytes per row (conflict-free ldmatrix and
//    cp.async), K/V (or Q/dO) tiles double-buffered with cp.async so that the
//    next tile streams in while the current one is multiplied.
//  * Simple fp32-accumulating kernels (any dtype, any hs <= 256, any alignment):
//    the fp32 path, used for exact checking against the CPU twin. A warp owns 4
//    rows, a lane one key (or query) of a 32-row tile in shared memory. Same
//    algorithm (online softmax forward; dQ and dK/dV backward kernels), with
//    expf/logf, and equally deterministic.
//
// Every reduction happens in a fixed order, so all paths are bit-reproducible.
//
// (A third, cuDNN's fused flash attention through its graph API, is
// kernels/attention_cudnn.cuh: the trainer's --attention cudnn.)
//
// The family in three headers, all included here:
//   kernels/attention_common.cuh    what both directions share: PTX wrappers, mma
//                                   fragments, tile loads and stores, the simple
//                                   kernels' shape, the launch helpers
//   kernels/attention_forward.cuh   the forward kernels, their launchers and
//                                   attention_forward_cuda
//   kernels/attention_backward.cuh  the backward kernels, their launchers,
//                                   attention_backward_cuda and
//                                   attention_workspace_bytes
#pragma once

#include "kernels/attention_common.cuh"
#include "kernels/attention_forward.cuh"
#include "kernels/attention_backward.cuh"
