// Workbench: layernorm forward, fused residual + layernorm forward, layernorm
// backward and the residual add (kernels/layernorm.cuh) against
// kernels/cpu/layernorm.h, with bandwidth as a fraction of a device-to-device
// copy (targets: forward and backward >= 80%).
//   make -C dev/cuda layernorm && ./dev/cuda/layernorm [check]
//
// Tolerances: fp32 1e-5 (max error over max |ref|) everywhere. dweight/dbias
// are sums over N rows; the GPU adds them in a different (tree) order than
// the CPU's row loop, which for N = 8192 random rows moves the sums by about
// sqrt(N) * 2^-24 relative to their size: ~5e-6 at worst, inside 1e-5.
#include "dev/cuda/common.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/layernorm.cuh"

template <typename T>
void test_layernorm(Bench& b, int N, int C, bool timed) {
    std::string tag = shape_str("[%s] N=%d C=%d", tname<T>(), N, C);
    const size_t NC = (size_t)N * C;
    BenchCtx bc(N, C);
    const KernelCtx& ctx = bc;
    // inputs with a per-row offset and scale, like a residual stream
    std::vector<T> inp = rand_vec<T>(NC, 31, -2.0f, 3.0f);
    std::vector<T> inp2 = rand_vec<T>(NC, 32);
    std::vector<T> w = rand_vec<T>(C, 33, 0.5f, 1.5f);
    std::vector<T> bias = rand_vec<T>(C, 34);
    std::vector<T> dout = rand_vec<T>(NC, 35);
    std::vector<T> dinp0 = rand_vec<T>(NC, 36);
    std::vector<T> dw0 = rand_vec<T>(C, 37), db0 = rand_vec<T>(C, 38);

    DevBuf<T> d_inp(inp), d_inp2(inp2), d_w(w), d_b(bias), d_out(NC), d_res(NC), d_dout(dout), d_dinp(dinp0),
        d_dw(dw0), d_db(db0);
    DevBuf<float> d_mean(N), d_rstd(N);

    // forward
    std::vector<T> ref_out(NC);
    std::vector<float> ref_mean(N), ref_rstd(N);
    layernorm_forward_cpu(ref_out.data(), ref_mean.data(), ref_rstd.data(), inp.data(), w.data(), bias.data(), N, C);
    layernorm_forward_cuda(ctx, d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, C);
    check_close(b, "layernorm_forward out " + tag, d_out.download(), ref_out);
    check_close(b, "layernorm_forward mean " + tag, d_mean.download(), ref_mean);
    check_close(b, "layernorm_forward rstd " + tag, d_rstd.download(), ref_rstd);

    // fused residual + forward
    std::vector<T> ref_res(NC), ref_out2(NC);
    std::vector<float> ref_mean2(N), ref_rstd2(N);
    residual_layernorm_forward_cpu(ref_res.data(), ref_out2.data(), ref_mean2.data(), ref_rstd2.data(), inp.data(),
                                   inp2.data(), w.data(), bias.data(), N, C);
    residual_layernorm_forward_cuda(ctx, d_res.ptr, d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_inp2.ptr, d_w.ptr,
                                    d_b.ptr, N, C);
    check_exact(b, "residual_layernorm_forward residual " + tag, d_res.download(), ref_res);
    std::vector<T> fused_out = d_out.download();
    std::vector<float> fused_mean = d_mean.download(), fused_rstd = d_rstd.download();
    check_close(b, "residual_layernorm_forward out " + tag, fused_out, ref_out2);
    check_close(b, "residual_layernorm_forward rstd " + tag, fused_rstd, ref_rstd2);
    // ZERO_VARIANTS=residual_ln moves every block's last residual add into the next
    // layernorm: the fused kernel must give what the add, then the layernorm, give
    {
        DevBuf<T> d_sum(NC), d_out3(NC);
        DevBuf<float> d_mean3(N), d_rstd3(N);
        residual_forward_cuda(ctx, d_sum.ptr, d_inp.ptr, d_inp2.ptr, NC);
        layernorm_forward_cuda(ctx, d_out3.ptr, d_mean3.ptr, d_rstd3.ptr, d_sum.ptr, d_w.ptr, d_b.ptr, N, C);
        check_exact(b, "residual_layernorm_forward out = add, then layernorm " + tag, fused_out, d_out3.download());
        check_exact(b, "residual_layernorm_forward mean = add, then layernorm " + tag, fused_mean, d_mean3.download());
        check_exact(b, "residual_layernorm_forward rstd = add, then layernorm " + tag, fused_rstd, d_rstd3.download());
    }

    // residual add
    residual_forward_cuda(ctx, d_out.ptr, d_inp.ptr, d_inp2.ptr, NC);
    check_exact(b, "residual_forward out " + tag, d_out.download(), ref_res);

    // backward (statistics from the CPU forward, so both sides see the same inputs)
    DevBuf<float> d_rmean(ref_mean), d_rrstd(ref_rstd);
    std::vector<T> ref_dinp = dinp0, ref_dw = dw0, ref_db = db0;
    layernorm_backward_cpu(ref_dinp.data(), ref_dw.data(), ref_db.data(), dout.data(), inp.data(), w.data(),
                           ref_mean.data(), ref_rstd.data(), N, C);
    layernorm_backward_cuda(ctx, d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_rmean.ptr,
                            d_rrstd.ptr, N, C);
    std::vector<T> g_dinp = d_dinp.download(), g_dw = d_dw.download(), g_db = d_db.download();
    check_close(b, "layernorm_backward dinp (accumulated) " + tag, g_dinp, ref_dinp);
    check_close(b, "layernorm_backward dweight (accumulated) " + tag, g_dw, ref_dw);
    check_close(b, "layernorm_backward dbias (accumulated) " + tag, g_db, ref_db);
    d_dinp.upload(dinp0), d_dw.upload(dw0), d_db.upload(db0);
    layernorm_backward_cuda(ctx, d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_rmean.ptr,
                            d_rrstd.ptr, N, C);
    check_exact(b, "layernorm_backward dweight rerun identical " + tag, d_dw.download(), g_dw);
    check_exact(b, "layernorm_backward dinp rerun identical " + tag, d_dinp.download(), g_dinp);

    if (timed && !b.check_only) {
        const double row = (double)NC * sizeof(T);
        double fwd_bytes = 2 * row + 8.0 * N;
        double rfwd_bytes = 4 * row + 8.0 * N;
        double bwd_bytes = 4 * row + 8.0 * N;  // dout, inp, dinp read; dinp written; mean, rstd
        double copy = b.copy_gbps(ctx.stream, (size_t)(bwd_bytes / 2));
        double ms = b.time_ms(ctx.stream, [&] {
            layernorm_forward_cuda(ctx, d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_w.ptr, d_b.ptr, N, C);
        });
        print_bw_vs_copy("layernorm_forward " + tag, ms, fwd_bytes, copy, 0.80);
        ms = b.time_ms(ctx.stream, [&] {
            residual_layernorm_forward_cuda(ctx, d_res.ptr, d_out.ptr, d_mean.ptr, d_rstd.ptr, d_inp.ptr, d_inp2.ptr,
                                            d_w.ptr, d_b.ptr, N, C);
        });
        print_bw_vs_copy("residual_layernorm_forward " + tag, ms, rfwd_bytes, copy, 0.80);
        ms = b.time_ms(ctx.stream, [&] {
            layernorm_backward_cuda(ctx, d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr, d_rmean.ptr,
                                    d_rrstd.ptr, N, C);
        });
        print_bw_vs_copy("layernorm_backward " + tag, ms, bwd_bytes, copy, 0.80);

        // The backward's grid, swept: the trainer runs LN_BWD_BLOCKS blocks of up
        // to LN_BWD_MAX_WARPS (8) warps, which at C 768 leaves ~2 blocks (16 warps)
        // per H100 SM, each warp walking N / 2048 rows one after another (bf16: 70%
        // of copy). Each grid is checked against the CPU twin, then timed whole
        // (the rows, and the column sums of its partial rows, which grow with the
        // blocks) and its column-sum pass alone, so that a new LN_BWD_BLOCKS comes
        // from a measurement. Its own workspace holds the widest grid's partials.
        const int grids[][2] = {{8, 128}, {8, 256}, {8, 384}, {8, 512}, {4, 512}, {4, 1024}, {16, 132}, {16, 264}};
        DevBuf<float> wide((size_t)1024 * 2 * C);
        KernelCtx wctx = ctx;
        wctx.workspace = wide.ptr;
        wctx.workspace_bytes = wide.n * sizeof(float);
        constexpr int X = Packed128<T>::size;
        const int S = ln_bwd_slots(C, ln_pick_packs(C / X), X);
        for (const auto& g : grids) {
            const int W = ln_bwd_warps(S, g[0]), nb = ln_bwd_blocks(N, W, g[1]);
            std::string gtag = shape_str("%s, %d warps x %d blocks (%.1f rows/warp)", tag.c_str(), W, nb,
                                         (double)N / (W * nb));
            auto backward = [&] {
                layernorm_backward_cuda(wctx, d_dinp.ptr, d_dw.ptr, d_db.ptr, d_dout.ptr, d_inp.ptr, d_w.ptr,
                                        d_rmean.ptr, d_rrstd.ptr, N, C, g[1], g[0]);
            };
            d_dinp.upload(dinp0), d_dw.upload(dw0), d_db.upload(db0);
            backward();
            check_close(b, "layernorm_backward dinp " + gtag, d_dinp.download(), ref_dinp);
            check_close(b, "layernorm_backward dweight " + gtag, d_dw.download(), ref_dw);
            check_close(b, "layernorm_backward dbias " + gtag, d_db.download(), ref_db);
            ms = b.time_ms(wctx.stream, backward);
            double sums_ms = b.time_ms(wctx.stream, [&] {
                finish_column_partials(wctx, d_dw.ptr, d_db.ptr, C, (const float*)wctx.workspace, nb, 2 * C);
            });
            print_bw_vs_copy("layernorm_backward " + gtag, ms, bwd_bytes, copy, 0.80);
            printf("    of which the column sums of %d partial rows: %.1f us\n", nb, sums_ms * 1e3);
        }

        ms = b.time_ms(ctx.stream, [&] { residual_forward_cuda(ctx, d_out.ptr, d_inp.ptr, d_inp2.ptr, NC); });
        print_bw_vs_copy("residual_forward " + tag, ms, 3 * row, copy, 0.80);
    }
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    test_layernorm<float>(b, 8 * 1024, 768, true);
    test_layernorm<bf16>(b, 8 * 1024, 768, true);
    // bf16 at the trainer's B 16 x T 1024 too: at N 8192 a bf16 pass is 12.6 MB
    // and 14-31 us on an H100, where launch and tail are a visible share; twice
    // the rows tells fixed cost from bandwidth (75 / 70% of copy at N 8192)
    test_layernorm<bf16>(b, 16 * 1024, 768, true);
    test_layernorm<f16>(b, 8 * 1024, 768, false);
    // GPT-2 1.5B width (register packs partly masked), a small odd shape, and
    // C = 100 (not a multiple of the 16-bit pack: scalar kernels)
    for (int C : {1600, 200, 100}) {
        int N = C == 1600 ? 1024 : 111;
        test_layernorm<float>(b, N, C, false);
        test_layernorm<bf16>(b, N, C, false);
        test_layernorm<f16>(b, N, C, false);
    }
    return b.finish();
}
