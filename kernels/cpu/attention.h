// CPU twin of causal self-attention, computed the way the fused GPU kernel does
// it: the T x T attention matrix is never stored. Forward saves only the output
// and each row's log-sum-exp; backward recomputes the probabilities from them.
//
// qkv is (B, T, 3C): q in channels [0, C), k in [C, 2C), v in [2C, 3C); head h
// owns channels [h*hs, (h+1)*hs) of each, hs = C / NH.
#pragma once

#include <cmath>
#include <vector>

#include "zero/base/dtype.h"

template <typename T>
void attention_forward_cpu(T* out,          // (B, T, C)
                           float* lse,      // (B, NH, T): log-sum-exp of each row's scaled scores
                           const T* qkv,    // (B, T, 3C)
                           int B, int T_, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t C3 = 3 * (size_t)C;
#pragma omp parallel
    {
        std::vector<float> score(T_), acc(hs);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int t = 0; t < T_; t++) {
                    const T* q = qkv + ((size_t)b * T_ + t) * C3 + h * hs;
                    float maxv = -INFINITY;
                    for (int j = 0; j <= t; j++) {
                        const T* k = qkv + ((size_t)b * T_ + j) * C3 + C + h * hs;
                        float s = 0.0f;
                        for (int i = 0; i < hs; i++) s += to_float(q[i]) * to_float(k[i]);
                        score[j] = s * scale;
                        maxv = fmaxf(maxv, score[j]);
                    }
                    float sum = 0.0f;
                    for (int j = 0; j <= t; j++) {
                        score[j] = expf(score[j] - maxv);
                        sum += score[j];
                    }
                    for (int i = 0; i < hs; i++) acc[i] = 0.0f;
                    for (int j = 0; j <= t; j++) {
                        const T* v = qkv + ((size_t)b * T_ + j) * C3 + 2 * C + h * hs;
                        float p = score[j] / sum;
                        for (int i = 0; i < hs; i++) acc[i] += p * to_float(v[i]);
                    }
                    T* o = out + ((size_t)b * T_ + t) * C + h * hs;
                    for (int i = 0; i < hs; i++) o[i] = from_float<T>(acc[i]);
                    lse[((size_t)b * NH + h) * T_ + t] = maxv + logf(sum);
                }
    }
}

// dqkv = d(loss)/d(qkv), overwritten. With p_tj = exp(s_tj - lse_t) recomputed:
//   D_t = dout_t . out_t,  dp_tj = dout_t . v_j,  ds_tj = p_tj (dp_tj - D_t)
//   dq_t = scale sum_j ds_tj k_j,  dk_j = scale sum_t ds_tj q_t,  dv_j = sum_t p_tj dout_t
// One thread owns one (b, h): dk and dv accumulate in fp32 and are rounded once.
template <typename T>
void attention_backward_cpu(T* dqkv,          // (B, T, 3C)
                            const T* dout,    // (B, T, C)
                            const T* qkv,     // (B, T, 3C)
                            const T* out,     // (B, T, C)
                            const float* lse, // (B, NH, T)
                            int B, int T_, int C, int NH) {
    int hs = C / NH;
    float scale = 1.0f / sqrtf((float)hs);
    size_t C3 = 3 * (size_t)C;
#pragma omp parallel
    {
        std::vector<float> p(T_), dk((size_t)T_ * hs), dv((size_t)T_ * hs), dq(hs);
#pragma omp for collapse(2) schedule(static)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                std::fill(dk.begin(), dk.end(), 0.0f);
                std::fill(dv.begin(), dv.end(), 0.0f);
                for (int t = 0; t < T_; t++) {
                    const T* q = qkv + ((size_t)b * T_ + t) * C3 + h * hs;
                    const T* dy = dout + ((size_t)b * T_ + t) * C + h * hs;
                    const T* y = out + ((size_t)b * T_ + t) * C + h * hs;
                    float row_lse = lse[((size_t)b * NH + h) * T_ + t];
                    float D = 0.0f;
                    for (int i = 0; i < hs; i++) D += to_float(dy[i]) * to_float(y[i]);
                    for (int i = 0; i < hs; i++) dq[i] = 0.0f;
                    for (int j = 0; j <= t; j++) {
                        const T* k = qkv + ((size_t)b * T_ + j) * C3 + C + h * hs;
                        const T* v = qkv + ((size_t)b * T_ + j) * C3 + 2 * C + h * hs;
                        float s = 0.0f, dp = 0.0f;
                        for (int i = 0; i < hs; i++) {
                            s += to_float(q[i]) * to_float(k[i]);
                            dp += to_float(dy[i]) * to_float(v[i]);
                        }
                        float pj = expf(s * scale - row_lse);
                        float ds = pj * (dp - D) * scale;
                        for (int i = 0; i < hs; i++) {
                            dq[i] += ds * to_float(k[i]);
                            dk[(size_t)j * hs + i] += ds * to_float(q[i]);
                            dv[(size_t)j * hs + i] += pj * to_float(dy[i]);
                        }
                    }
                    T* dqt = dqkv + ((size_t)b * T_ + t) * C3 + h * hs;
                    for (int i = 0; i < hs; i++) dqt[i] = from_float<T>(dq[i]);
                }
                for (int j = 0; j < T_; j++) {
                    T* dkj = dqkv + ((size_t)b * T_ + j) * C3 + C + h * hs;
                    T* dvj = dqkv + ((size_t)b * T_ + j) * C3 + 2 * C + h * hs;
                    for (int i = 0; i < hs; i++) {
                        dkj[i] = from_float<T>(dk[(size_t)j * hs + i]);
                        dvj[i] = from_float<T>(dv[(size_t)j * hs + i]);
                    }
                }
            }
    }
}
