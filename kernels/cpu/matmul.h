// CPU twin of the matmul family: the transformer's linear layers on top of
// gemm_cpu, with the bias and GELU epilogues the CUDA build fuses.
#pragma once

#include <cstring>

#include "kernels/cpu/gelu.h"
#include "kernels/cpu/gemm.h"
#include "zero/base/dtype.h"

// out = inp @ weight^T + bias. With gelu_pre != null the GELU is applied:
// gelu_pre receives the pre-activation and out = gelu(gelu_pre).
template <typename T>
void matmul_forward_cpu(T* out /* (BT,OC) */, const T* inp /* (BT,C) */, const T* weight /* (OC,C) */,
                        const T* bias /* (OC) or null */, int BT, int C, int OC, T* gelu_pre /* (BT,OC) or null */) {
    T* pre = gelu_pre ? gelu_pre : out;
    if (bias) {  // start from the bias so that the result is rounded once
#pragma omp parallel for schedule(static)
        for (int i = 0; i < BT; i++) memcpy(pre + (size_t)i * OC, bias, OC * sizeof(T));
    }
    gemm_cpu(false, true, BT, OC, C, 1.0f, inp, C, weight, C, bias ? 1.0f : 0.0f, pre, OC);
    if (gelu_pre) gelu_forward_cpu(out, gelu_pre, (size_t)BT * OC);
}

// dinp = dout @ weight (overwritten; times gelu'(gelu_pre) when gelu_pre != null);
// dweight += dout^T @ inp; dbias += column sums of dout (when not null).
template <typename T>
void matmul_backward_cpu(T* dinp /* (BT,C) */, T* dweight /* (OC,C) */, T* dbias /* (OC) */,
                         const T* dout /* (BT,OC) */, const T* inp /* (BT,C) */, const T* weight /* (OC,C) */, int BT,
                         int C, int OC, const T* gelu_pre /* (BT,C) or null */) {
    gemm_cpu(false, false, BT, C, OC, 1.0f, dout, OC, weight, C, 0.0f, dinp, C);
    if (gelu_pre) gelu_backward_cpu(dinp, gelu_pre, dinp, (size_t)BT * C);
    gemm_cpu(true, false, OC, C, BT, 1.0f, dout, OC, inp, C, 1.0f, dweight, C);
    if (dbias) {
#pragma omp parallel for schedule(static)
        for (int o = 0; o < OC; o++) {
            float acc = to_float(dbias[o]);
            for (int i = 0; i < BT; i++) acc += to_float(dout[(size_t)i * OC + o]);
            dbias[o] = from_float<T>(acc);
        }
    }
}
