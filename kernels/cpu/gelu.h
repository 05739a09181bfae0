// CPU twin of GELU, tanh approximation as in GPT-2:
// gelu(x) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
#pragma once

#include <cmath>

#include "zero/base/dtype.h"

constexpr float GELU_SCALE = 0.7978845608028654f;  // sqrt(2/pi)

// HD: the CUDA kernels (kernels/gelu.cuh) use these same functions.
HD float gelu_value(float x) {
    float cube = 0.044715f * x * x * x;
    return 0.5f * x * (1.0f + tanhf(GELU_SCALE * (x + cube)));
}

HD float gelu_derivative(float x) {
    float cube = 0.044715f * x * x * x;
    float t = tanhf(GELU_SCALE * (x + cube));
    float sech2 = 1.0f - t * t;
    return 0.5f * (1.0f + t) + 0.5f * x * sech2 * GELU_SCALE * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename T>
void gelu_forward_cpu(T* out, const T* inp, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) out[i] = from_float<T>(gelu_value(to_float(inp[i])));
}

// dinp = gelu'(inp) * dout; dinp may alias dout
template <typename T>
void gelu_backward_cpu(T* dinp, const T* inp, const T* dout, size_t n) {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dinp[i] = from_float<T>(gelu_derivative(to_float(inp[i])) * to_float(dout[i]));
}
