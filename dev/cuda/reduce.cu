// Workbench: reduce_sum, accumulate and sumsq
// (kernels/reduce.cuh) against kernels/cpu/reduce.h.
//   make -C dev/cuda reduce && ./dev/cuda/reduce [check]
//
// reduce_sum and accumulate do the CPU twin's fp32 operations in the same
// order and round once: bit-for-bit checks. sumsq adds in a different (fixed)
// order than the CPU's 4096-element blocks, so its check is relative: 1e-5
// (the fp32 rounding of sums of ~10^3 positive terms per thread is ~1e-6).
// sumsq must also be reproducible run to run and non-finite when an element is
// inf or NaN.
//
// The prepared variants (ZERO_VARIANTS): sumsq over a table of pieces in two
// launches (fused_optimizer) must give every piece the bits of sumsq_cuda on
// it alone, over GPT-2 124M's pieces and ragged ones; loss_total (device_loss)
// the bits of its CPU twin, whose tree it is, in place too.
#include "dev/cuda/common.h"
#include "kernels/cpu/reduce.h"
#include "kernels/reduce.cuh"
#include "zero/layout/param_layout.h"
#include "zero/layout/shard_plan.h"

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

// pieces (offset, numel) of one flat gradient buffer; the empty ones stand for the pieces counted elsewhere
template <typename T>
void test_sumsq_pieces(Bench& b, const char* name, const std::vector<std::pair<size_t, size_t>>& pieces, bool timed) {
    size_t total = 0;
    for (const auto& p : pieces) total = std::max(total, p.first + p.second);
    std::string tag = shape_str("[%s] %s: %zu pieces, %zu elements", tname<T>(), name, pieces.size(), total);
    std::vector<T> x = rand_vec<T>(total, 103, -0.05f, 0.05f);
    DevBuf<T> d_x(x);
    std::vector<OptPiece<T>> table;
    for (const auto& p : pieces) table.push_back({d_x.ptr + p.first, nullptr, 0, p.second, 0, 0, 0, 0});
    const unsigned blocks = lay_out_pieces_cuda(table, true, nullptr, nullptr, nullptr);
    DevBuf<OptPiece<T>> d_table(table);
    // the workspace holds the pass-1 partials of every piece at once
    BenchCtx bc(1, 8);
    KernelCtx ctx = bc;
    DevBuf<float> work(std::max<size_t>(blocks, SUMSQ_BLOCKS));
    ctx.workspace = work.ptr, ctx.workspace_bytes = work.n * sizeof(float);
    DevBuf<float> d_out(pieces.size()), d_each(pieces.size());
    sumsq_pieces_cuda(ctx, d_out.ptr, d_table.ptr, (int)table.size(), blocks);
    for (size_t i = 0; i < pieces.size(); i++)
        sumsq_cuda(ctx, d_each.ptr + i, d_x.ptr + pieces[i].first, pieces[i].second);
    std::vector<float> got = d_out.download();
    check_exact(b, "sumsq_pieces = sumsq piece by piece " + tag, got, d_each.download());
    double worst = 0;
    for (size_t i = 0; i < pieces.size(); i++) {
        double ref = sumsq_cpu(x.data() + pieces[i].first, pieces[i].second);
        worst = std::max(worst, std::fabs(got[i] - ref) / std::max(ref, 1e-30));
    }
    char detail[80];
    snprintf(detail, sizeof(detail), "worst rel %.2e (tol 1e-5)", worst);
    b.record(worst <= 1e-5, "sumsq_pieces ~ CPU twin " + tag, detail);
    if (timed && !b.check_only) {
        double one = b.time_ms(ctx.stream,
                               [&] { sumsq_pieces_cuda(ctx, d_out.ptr, d_table.ptr, (int)table.size(), blocks); });
        double each = b.time_ms(ctx.stream, [&] {
            for (size_t i = 0; i < pieces.size(); i++)
                sumsq_cuda(ctx, d_each.ptr + i, d_x.ptr + pieces[i].first, pieces[i].second);
        });
        print_bw("sumsq_pieces, two launches " + tag, one, (double)total * sizeof(T));
        print_bw("sumsq, two launches per piece " + tag, each, (double)total * sizeof(T));
    }
}

// loss_total: the CPU twin's tree, bit for bit; in place (its double over the first 8 bytes of x) too
void test_loss_total(Bench& b, size_t n, bool timed) {
    std::string tag = shape_str("n=%zu", n);
    BenchCtx bc(1, 8);
    const KernelCtx& ctx = bc;
    // values of both signs over 2^-20 .. 2^40: sums of doubles round and cancel, so the order shows in
    // the bits (losses of one size add up exactly in any order, which would hide a wrong tree)
    std::vector<float> x(n);
    for (size_t i = 0; i < n; i++)
        x[i] = (random_u32(107, i) & 1 ? -1.0f : 1.0f) *
               ldexpf(0.5f + random_uniform(105, i), (int)(random_u32(106, i) % 61) - 20);
    const double ref = loss_total_cpu(x.data(), n);
    if (n == 65536 || n == 16384) {  // the data can tell a wrong tree: another order (a plain loop) gives other bits
        double plain = 0.0;
        for (float f : x) plain += f;
        b.record(plain != ref, "loss_total's data tells summation orders apart " + tag, "");
    }
    DevBuf<float> d_x(x);
    DevBuf<double> d_out(1);
    loss_total_cuda(ctx, d_out.ptr, d_x.ptr, n);
    std::vector<double> got = d_out.download();
    check_exact(b, "loss_total = CPU twin " + tag, got, std::vector<double>{ref});
    if (n >= 2) {
        loss_total_cuda(ctx, (double*)d_x.ptr, d_x.ptr, n);
        double in_place = 0;
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(&in_place, d_x.ptr, sizeof(double), cudaMemcpyDeviceToHost));
        check_exact(b, "loss_total in place = CPU twin " + tag, std::vector<double>{in_place},
                    std::vector<double>{ref});
    }
    if (timed && !b.check_only) {
        d_x.upload(x);
        double ms = b.time_ms(ctx.stream, [&] { loss_total_cuda(ctx, d_out.ptr, d_x.ptr, n); });
        double plain = b.time_ms(ctx.stream, [&] {
            std::vector<float> h(n);
            cudaCheck(cudaMemcpyAsync(h.data(), d_x.ptr, n * sizeof(float), cudaMemcpyDeviceToHost, ctx.stream));
            cudaCheck(cudaStreamSynchronize(ctx.stream));
            double s = 0;
            for (float f : h) s += f;
            (void)s;
        });
        print_bw("loss_total " + tag, ms, (double)n * 4);
        printf("  %-58s %8.3f ms\n", ("the default: read back and summed on the host " + tag).c_str(), plain);
    }
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
    test_sumsq<float>(b, 124475904, 0, true);
    test_sumsq<bf16>(b, 124475904, 0, true);
    test_sumsq<f16>(b, big, 0, false);
    for (size_t off : {0, 1}) {
        test_sumsq<float>(b, odd, off, false);
        test_sumsq<bf16>(b, odd, off, false);
        test_sumsq<bf16>(b, 1000, off, false);
    }
    // ZERO_VARIANTS=fused_optimizer: GPT-2 124M's pieces at one rank, then ragged ones (odd
    // lengths, unaligned starts, empty pieces as those counted elsewhere, one past SUMSQ_BLOCKS blocks)
    {
        ParamLayout layout(GPT2Config{}, 1);  // (the defaults are d12)
        ShardPlan plan(layout.unit_specs(), 1, SHARD_ALIGN);
        std::vector<std::pair<size_t, size_t>> gpt2;
        for (const ShardPiece& p : plan.pieces_full()) gpt2.push_back({p.full_offset, p.numel});
        test_sumsq_pieces<bf16>(b, "GPT-2 124M", gpt2, true);
        test_sumsq_pieces<float>(b, "GPT-2 124M", gpt2, false);
        const std::vector<std::pair<size_t, size_t>> ragged = {
            {0, 100003}, {100003, 0}, {100005, 17}, {100030, 1}, {100040, 16384}, {116425, 16385}, {140000, 0},
            {140001, (size_t)SUMSQ_BLOCKS * SUMSQ_PER_BLOCK + 5}};
        test_sumsq_pieces<bf16>(b, "ragged", ragged, false);
        test_sumsq_pieces<float>(b, "ragged", ragged, false);
        test_sumsq_pieces<f16>(b, "ragged", ragged, false);
    }
    // ZERO_VARIANTS=device_loss: the trainer's B 64 and B 16 x T 1024, then ragged
    for (size_t n : {65536, 16384, 1000, 1, 70001}) test_loss_total(b, n, n == 65536);
    return b.finish();
}
