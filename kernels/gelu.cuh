// GELU on the GPU (tanh approximation, the very functions of kernels/cpu/gelu.h):
//   gelu(x)  = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   gelu'(x) = 0.5 (1 + t) + 0.5 x (1 - t^2) sqrt(2/pi) (1 + 3*0.044715 x^2)
// Elementwise, 128-bit packs, grid-stride; a scalar path covers lengths that
// are not a multiple of the pack and pointers that are not 16-byte aligned.
#pragma once

#include "kernels/cpu/gelu.h"  // gelu_value, gelu_derivative: one formula for both builds
#include "kernels/cuda_common.cuh"


// out (n) = gelu(inp (n)). VEC: packs of Packed128<T>::size elements, else scalars.
template <typename T, bool VEC>
__global__ void gelu_forward_kernel(T* out, const T* inp, size_t n) {
    constexpr int X = Packed128<T>::size;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (VEC) {
        const size_t npack = n / X;
        for (size_t p = tid; p < npack; p += stride) {
            Packed128<T> x = load128cs(inp + p * X);
            Packed128<T> y;
#pragma unroll
            for (int k = 0; k < X; k++) y.set(k, gelu_value(x.get(k)));
            store128(out + p * X, y);
        }
        done = npack * X;
    }
    for (size_t i = done + tid; i < n; i += stride) out[i] = from_float<T>(gelu_value(to_float(inp[i])));
}

// dinp (n) = gelu'(inp) * dout; dinp may alias dout (each element is read, then written, by one thread)
template <typename T, bool VEC>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, size_t n) {
    constexpr int X = Packed128<T>::size;
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t done = 0;
    if (VEC) {
        const size_t npack = n / X;
        for (size_t p = tid; p < npack; p += stride) {
            Packed128<T> x = load128cs(inp + p * X);
            Packed128<T> d = load128(dout + p * X);
            Packed128<T> y;
#pragma unroll
            for (int k = 0; k < X; k++) y.set(k, gelu_derivative(x.get(k)) * d.get(k));
            store128(dinp + p * X, y);
        }
        done = npack * X;
    }
    for (size_t i = done + tid; i < n; i += stride)
        dinp[i] = from_float<T>(gelu_derivative(to_float(inp[i])) * to_float(dout[i]));
}

template <typename T>
void gelu_forward_cuda(const KernelCtx& ctx, T* out, const T* inp, size_t n) {
    if (n == 0) return;
    const int block = 256;
    if (aligned16(out) && aligned16(inp)) {
        gelu_forward_kernel<T, true><<<grid_for(n / Packed128<T>::size + 1, block), block, 0, ctx.stream>>>(out, inp, n);
    } else {
        gelu_forward_kernel<T, false><<<grid_for(n, block), block, 0, ctx.stream>>>(out, inp, n);
    }
    cudaLaunchCheck();
}

template <typename T>
void gelu_backward_cuda(const KernelCtx& ctx, T* dinp, const T* inp, const T* dout, size_t n) {
    if (n == 0) return;
    const int block = 256;
    if (aligned16(dinp) && aligned16(inp) && aligned16(dout)) {
        gelu_backward_kernel<T, true>
            <<<grid_for(n / Packed128<T>::size + 1, block), block, 0, ctx.stream>>>(dinp, inp, dout, n);
    } else {
        gelu_backward_kernel<T, false><<<grid_for(n, block), block, 0, ctx.stream>>>(dinp, inp, dout, n);
    }
    cudaLaunchCheck();
}
