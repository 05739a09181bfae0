// Workbench: GELU forward (kernels/gelu.cuh) against kernels/cpu/gelu.h, plus
// the GELU backward kernel matmul_backward falls back to.
//   make -C dev/cuda gelu && ./dev/cuda/gelu [check]
#include "dev/cuda/common.h"
#include "kernels/cpu/gelu.h"
#include "kernels/gelu.cuh"

template <typename T>
void test_gelu(Bench& b, size_t n, size_t offset, bool timed) {
    // offset: start the arrays `offset` elements into their allocations (unaligned when not a multiple of the pack)
    std::string tag = shape_str("[%s] n=%zu offset=%zu", tname<T>(), n, offset);
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    std::vector<T> inp = rand_vec<T>(n, 11, -4.0f, 4.0f);
    std::vector<T> dout = rand_vec<T>(n, 12);

    std::vector<T> ref_out(n), ref_din(n);
    gelu_forward_cpu(ref_out.data(), inp.data(), n);
    gelu_backward_cpu(ref_din.data(), inp.data(), dout.data(), n);

    DevBuf<T> d_inp(n + offset), d_out(n + offset), d_dout(n + offset);
    h2d(d_inp.ptr + offset, inp.data(), n * sizeof(T));
    h2d(d_dout.ptr + offset, dout.data(), n * sizeof(T));
    gelu_forward_cuda(ctx, d_out.ptr + offset, d_inp.ptr + offset, n);
    std::vector<T> out(n);
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    cudaCheck(cudaMemcpy(out.data(), d_out.ptr + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
    check_close(b, "gelu_forward out " + tag, out, ref_out);

    // backward in place (dinp aliases dout), as matmul_backward uses it
    gelu_backward_cuda(ctx, d_dout.ptr + offset, d_inp.ptr + offset, d_dout.ptr + offset, n);
    std::vector<T> din(n);
    cudaCheck(cudaStreamSynchronize(ctx.stream));
    cudaCheck(cudaMemcpy(din.data(), d_dout.ptr + offset, n * sizeof(T), cudaMemcpyDeviceToHost));
    check_close(b, "gelu_backward dinp (in place) " + tag, din, ref_din);

    if (timed && !b.check_only) {
        double ms = b.time_ms(ctx.stream, [&] { gelu_forward_cuda(ctx, d_out.ptr, d_inp.ptr, n); });
        print_bw("gelu_forward " + tag, ms, 2.0 * n * sizeof(T));
        ms = b.time_ms(ctx.stream, [&] { gelu_backward_cuda(ctx, d_out.ptr, d_inp.ptr, d_dout.ptr, n); });
        print_bw("gelu_backward " + tag, ms, 3.0 * n * sizeof(T));
    }
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    const size_t big = (size_t)8 * 1024 * 4 * 768;  // B*T*4C of GPT-2 124M
    test_gelu<float>(b, big, 0, true);
    test_gelu<bf16>(b, big, 0, true);
    test_gelu<f16>(b, big, 0, false);
    for (size_t off : {0, 1}) {  // odd length; aligned and unaligned (scalar kernel)
        test_gelu<float>(b, 3 * 37 * 4 * 200 + 5, off, false);
        test_gelu<bf16>(b, 3 * 37 * 4 * 200 + 5, off, false);
        test_gelu<f16>(b, 3 * 37 * 4 * 200 + 5, off, false);
    }
    return b.finish();
}
