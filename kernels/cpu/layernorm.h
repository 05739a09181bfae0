// CPU twin of layernorm: plain and fused with the residual add. Statistics are
// fp32 (mean and 1/std saved for the backward pass), eps = 1e-5 as in GPT-2.
#pragma once

#include <cmath>
#include <vector>

#include "zero/base/dtype.h"

constexpr float LAYERNORM_EPS = 1e-5f;

template <typename T>
inline void layernorm_row(T* out, float* mean, float* rstd, const T* x, const T* w, const T* b, int C) {
    float m = 0.0f;
    for (int c = 0; c < C; c++) m += to_float(x[c]);
    m /= C;
    float var = 0.0f;
    for (int c = 0; c < C; c++) {
        float d = to_float(x[c]) - m;
        var += d * d;
    }
    var /= C;
    float s = 1.0f / sqrtf(var + LAYERNORM_EPS);
    for (int c = 0; c < C; c++)
        out[c] = from_float<T>((to_float(x[c]) - m) * s * to_float(w[c]) + to_float(b[c]));
    *mean = m;
    *rstd = s;
}

template <typename T>
void layernorm_forward_cpu(T* out, float* mean, float* rstd,  // (N, C), (N), (N)
                           const T* inp,                      // (N, C)
                           const T* weight, const T* bias,    // (C), (C)
                           int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++)
        layernorm_row(out + (size_t)i * C, mean + i, rstd + i, inp + (size_t)i * C, weight, bias, C);
}

// residual = inp1 + inp2 (rounded to T), then out = layernorm(residual).
template <typename T>
void residual_layernorm_forward_cpu(T* residual, T* out, float* mean, float* rstd,  // (N,C), (N,C), (N), (N)
                                    const T* inp1, const T* inp2,                   // (N, C) each
                                    const T* weight, const T* bias, int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        T* r = residual + (size_t)i * C;
        for (int c = 0; c < C; c++)
            r[c] = from_float<T>(to_float(inp1[(size_t)i * C + c]) + to_float(inp2[(size_t)i * C + c]));
        layernorm_row(out + (size_t)i * C, mean + i, rstd + i, r, weight, bias, C);
    }
}

// dinp += d layernorm / d inp (so the residual stream's gradient accumulates in
// place), dweight += sum_i dout*norm, dbias += sum_i dout. Rows are independent
// for dinp; the column sums are done per channel in row order (deterministic).
template <typename T>
void layernorm_backward_cpu(T* dinp, T* dweight, T* dbias,  // (N, C), (C), (C): accumulated into
                            const T* dout, const T* inp,    // (N, C) each
                            const T* weight,                // (C)
                            const float* mean, const float* rstd,  // (N)
                            int N, int C) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const T* x = inp + (size_t)i * C;
        const T* dy = dout + (size_t)i * C;
        T* dx = dinp + (size_t)i * C;
        float m = mean[i], s = rstd[i];
        float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
        for (int c = 0; c < C; c++) {
            float norm = (to_float(x[c]) - m) * s;
            float dnorm = to_float(weight[c]) * to_float(dy[c]);
            dnorm_mean += dnorm;
            dnorm_norm_mean += dnorm * norm;
        }
        dnorm_mean /= C;
        dnorm_norm_mean /= C;
        for (int c = 0; c < C; c++) {
            float norm = (to_float(x[c]) - m) * s;
            float dnorm = to_float(weight[c]) * to_float(dy[c]);
            float g = (dnorm - dnorm_mean - norm * dnorm_norm_mean) * s;
            dx[c] = from_float<T>(to_float(dx[c]) + g);
        }
    }
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float dw = to_float(dweight[c]), db = to_float(dbias[c]);
        for (int i = 0; i < N; i++) {
            float dy = to_float(dout[(size_t)i * C + c]);
            dw += dy * (to_float(inp[(size_t)i * C + c]) - mean[i]) * rstd[i];
            db += dy;
        }
        dweight[c] = from_float<T>(dw);
        dbias[c] = from_float<T>(db);
    }
}

// out = a + b: a residual connection
template <typename T>
void residual_forward_cpu(T* out, const T* a, const T* b, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = from_float<T>(to_float(a[i]) + to_float(b[i]));
}
