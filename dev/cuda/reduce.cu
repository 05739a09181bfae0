// Workbench: reduce_sum, accumulate, cast and sumsq
// (kernels/reduce.cuh) against kernels/cpu/reduce.h.
//   make -C dev/cuda reduce && ./dev/cuda/reduce [check]
//
// reduce_sum / accumulate / cast do the CPU twin's fp32 operations in the same
// order and round once: bit-for-bit checks. sumsq adds in a different (fixed)
// order than the CPU's 4096-element blocks, so its check is relative: 1e-5
// (the fp32 rounding of sums of ~10^3 positive terms per thread is ~1e-6).
// sumsq must also be reproducible run to run and non-finite when an element is
// inf or NaN.
#include "dev/cuda/common.h"
#include "kernels/cpu/reduce.h"
#include "kernels/reduce.cuh"

template <typename T>
void test_reduce_sum(Bench& b, size_t n, int nsrc, bool alias, bool timed) {
    std::string tag = shape_str("[%s] n=%zu nsrc=%d%s", tname<T>(), n, nsrc, alias ? " dst=srcs[1]" : "");
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    std::vector<std::vector<T>> h(nsrc);
    std::vector<DevBuf<T>*> d(nsrc);
    std::vector<const T*> hp(nsrc), dp(nsrc);
    for (int r = 0; r < nsrc; r++) {
        h[r] = rand_vec<T>(n, 71 + r);
        d[r] = new DevBuf<T>(h[r]);
        hp[r] = h[r].data();
        dp[r] = d[r]->ptr;
    }
    std::vector<T> ref(n);
    reduce_sum_cpu(ref.data(), hp.data(), nsrc, n);
    DevBuf<T> d_dst(n);
    T* dst = alias && nsrc > 1 ? d[1]->ptr : d_dst.ptr;
    reduce_sum_cuda(ctx, dst, dp.data(), nsrc, n);
    std::vector<T> got(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(got.data(), dst, n * sizeof(T), cudaMemcpyDeviceToHost));
    check_exact(b, "reduce_sum " + tag, got, ref);
    if (timed && !b.check_only && !alias) {
        double ms = b.time_ms(ctx.stream, [&] { reduce_sum_cuda(ctx, d_dst.ptr, dp.data(), nsrc, n); });
        print_bw("reduce_sum " + tag, ms, (double)n * sizeof(T) * (nsrc + 1));
    }
    for (auto* p : d) delete p;
}

template <typename T>
void test_accumulate(Bench& b, size_t n, size_t offset, bool overwrite, bool timed) {
    using Td = T;
    using Ts = T;
    std::string tag = shape_str("[%s] n=%zu offset=%zu%s", tname<T>(), n, offset, overwrite ? " overwrite" : "");
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    std::vector<Td> dst = rand_vec<Td>(n, 81);
    std::vector<Ts> src = rand_vec<Ts>(n, 82);
    std::vector<Td> ref = dst;
    accumulate_cpu(ref.data(), src.data(), n, overwrite);
    DevBuf<Td> d_dst(n + offset);
    DevBuf<Ts> d_src(n + offset);
    h2d(d_dst.ptr + offset, dst.data(), n * sizeof(Td));
    h2d(d_src.ptr + offset, src.data(), n * sizeof(Ts));
    accumulate_cuda(ctx, d_dst.ptr + offset, d_src.ptr + offset, n, overwrite);
    std::vector<Td> got(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(got.data(), d_dst.ptr + offset, n * sizeof(Td), cudaMemcpyDeviceToHost));
    check_exact(b, "accumulate " + tag, got, ref);
    if (timed && !b.check_only) {
        double ms = b.time_ms(ctx.stream, [&] { accumulate_cuda(ctx, d_dst.ptr, d_src.ptr, n, overwrite); });
        print_bw("accumulate " + tag, ms, (double)n * (sizeof(Ts) + (overwrite ? 1 : 2) * sizeof(Td)));
    }
}

template <typename Td, typename Ts>
void test_cast(Bench& b, size_t n, size_t offset, bool timed) {
    std::string tag = shape_str("[%s <- %s] n=%zu offset=%zu", tname<Td>(), tname<Ts>(), n, offset);
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    std::vector<Ts> src = rand_vec<Ts>(n, 91, -70000.0f, 70000.0f);  // includes fp16 overflow to inf
    std::vector<Td> ref(n);
    cast_cpu(ref.data(), src.data(), n);
    DevBuf<Ts> d_src(n + offset);
    DevBuf<Td> d_dst(n + offset);
    h2d(d_src.ptr + offset, src.data(), n * sizeof(Ts));
    cast_cuda(ctx, d_dst.ptr + offset, d_src.ptr + offset, n);
    std::vector<Td> got(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(got.data(), d_dst.ptr + offset, n * sizeof(Td), cudaMemcpyDeviceToHost));
    check_exact(b, "cast " + tag, got, ref);
    if (timed && !b.check_only) {
        double ms = b.time_ms(ctx.stream, [&] { cast_cuda(ctx, d_dst.ptr, d_src.ptr, n); });
        print_bw("cast " + tag, ms, (double)n * (sizeof(Ts) + sizeof(Td)));
    }
}

template <typename T>
void test_sumsq(Bench& b, size_t n, size_t offset, bool timed) {
    std::string tag = shape_str("[%s] n=%zu offset=%zu", tname<T>(), n, offset);
    BenchCtx bc(1, 8);  // the workspace sized for the smallest batch must still hold the partials
    const KernelCtx& ctx = bc;
    std::vector<T> x = rand_vec<T>(n, 101, -2.0f, 2.0f);
    double ref = sumsq_cpu(x.data(), n);
    DevBuf<T> d_x(n + offset);
    DevBuf<float> d_out(2);
    h2d(d_x.ptr + offset, x.data(), n * sizeof(T));
    sumsq_cuda(ctx, d_out.ptr, d_x.ptr + offset, n);
    sumsq_cuda(ctx, d_out.ptr + 1, d_x.ptr + offset, n);
    std::vector<float> got = d_out.download();
    check_scalar(b, "sumsq " + tag, got[0], ref, 1e-5);
    b.record(memcmp(&got[0], &got[1], 4) == 0, "sumsq rerun identical " + tag, "");
    // an inf, then a NaN, anywhere makes it non-finite
    for (float bad : {INFINITY, NAN}) {
        std::vector<T> y = x;
        y[n / 3] = from_float<T>(bad);
        h2d(d_x.ptr + offset, y.data(), n * sizeof(T));
        sumsq_cuda(ctx, d_out.ptr, d_x.ptr + offset, n);
        float r = d_out.download()[0];
        b.record(!std::isfinite(r), shape_str("sumsq with one %s is non-finite ", std::isnan(bad) ? "NaN" : "inf") + tag,
                 "");
    }
    if (timed && !b.check_only) {
        h2d(d_x.ptr, x.data(), n * sizeof(T));
        double ms = b.time_ms(ctx.stream, [&] { sumsq_cuda(ctx, d_out.ptr, d_x.ptr, n); });
        print_bw("sumsq " + tag, ms, (double)n * sizeof(T));
    }
}

template <typename Td>
void test_casts_from(Bench& b, size_t n, size_t off) {
    test_cast<Td, float>(b, n, off, false);
    test_cast<Td, bf16>(b, n, off, false);
    test_cast<Td, f16>(b, n, off, false);
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    const size_t big = (size_t)1 << 24, odd = 100003;
    for (int nsrc : {1, 2, 4, 8}) {
        test_reduce_sum<float>(b, big, nsrc, false, nsrc == 8);
        test_reduce_sum<bf16>(b, big, nsrc, false, nsrc == 8);
        test_reduce_sum<f16>(b, odd, nsrc, false, false);
        test_reduce_sum<bf16>(b, odd, nsrc, true, false);
    }
    for (bool ow : {false, true}) {
        test_accumulate<float>(b, big, 0, ow, true);
        test_accumulate<bf16>(b, big, 0, ow, true);
        test_accumulate<f16>(b, odd, 0, ow, false);
        for (size_t off : {0, 1}) {
            test_accumulate<bf16>(b, odd, off, ow, false);
        }
    }
    for (size_t off : {0, 1}) {
        test_casts_from<float>(b, odd, off);
        test_casts_from<bf16>(b, odd, off);
        test_casts_from<f16>(b, odd, off);
    }
    test_cast<bf16, float>(b, big, 0, true);
    test_cast<float, bf16>(b, big, 0, true);
    test_sumsq<float>(b, 124475904, 0, true);
    test_sumsq<bf16>(b, 124475904, 0, true);
    test_sumsq<f16>(b, big, 0, false);
    for (size_t off : {0, 1}) {
        test_sumsq<float>(b, odd, off, false);
        test_sumsq<bf16>(b, odd, off, false);
        test_sumsq<bf16>(b, 1000, off, false);
    }
    return b.finish();
}
