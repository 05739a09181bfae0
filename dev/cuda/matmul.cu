// Workbench: matmul forward/backward through cuBLASLt (kernels/matmul.cuh)
// against its CPU twin in kernels/cpu/matmul.h (gemm_cpu + the GELU and dbias
// loops), for the GPT-2 124M shapes, plus TFLOP/s.
//   make -C dev/cuda matmul && ./dev/cuda/matmul [check]
//   ZERO_NO_GELU_FUSION=1 ./dev/cuda/matmul check     (the unfused GELU path for bf16/fp16 too)
//
// Tolerances. fp32: both sides are fp32 FMA dot products of length K (no TF32),
// summed in different orders; the rounding error of such a sum grows like
// sqrt(K) * 2^-24 times the typical partial-sum size, so the bound is
// 1e-5 * max(1, sqrt(K / 768)): 1e-5 for K = 768, 2e-5 for K = 3072 and
// 3.3e-5 for the weight gradients (K = BT = 8192). bf16/fp16: 1e-2 (relative L2).
// dbias's wide grid (ZERO_VARIANTS=dbias_blocks: more row chunks, so that a
// 768-wide bias fills the GPU) is held to the same tolerance, rerun bit for
// bit, and timed beside the default grid; its workspace is sized by the
// formula with the variant's needs (a default-sized one would refuse it).
#include "dev/cuda/common.h"
#include "kernels/cpu/matmul.h"
#include "kernels/matmul.cuh"

inline double ktol(int K) { return 1e-5 * std::max(1.0, std::sqrt(K / 768.0)); }

// One layer shape: forward (BT,C) -> (BT,OC) with optional bias and GELU, then
// the backward of the same matmul, with gelu_bwd: the backward of a matmul
// whose input was produced by a GELU (dinp *= gelu'(pre)).
template <typename T>
void test_matmul(Bench& b, const char* name, int BT, int C, int OC, bool with_bias, bool gelu_fwd, bool gelu_bwd,
                 bool timed) {
    std::string tag = shape_str("[%s] %s BT=%d C=%d OC=%d", tname<T>(), name, BT, C, OC);
    BenchCtx bc(BT, 768), wide_bc(BT, 768, 0, true);
    const KernelCtx &ctx = bc, &wide = wide_bc;
    const size_t nin = (size_t)BT * C, nout = (size_t)BT * OC, nw = (size_t)OC * C;
    // scaled like a trained layer's values, so GELU sees a spread of inputs
    std::vector<T> inp = rand_vec<T>(nin, 41);
    std::vector<T> w = rand_vec<T>(nw, 42, -2.0f / std::sqrt((float)C), 2.0f / std::sqrt((float)C));
    std::vector<T> bias = rand_vec<T>(OC, 43);
    std::vector<T> dout = rand_vec<T>(nout, 44);
    std::vector<T> pre_in = rand_vec<T>(nin, 45, -3.0f, 3.0f);  // the GELU input that made `inp` (backward)
    std::vector<T> dw0 = rand_vec<T>(nw, 46, -0.1f, 0.1f), db0 = rand_vec<T>(OC, 47, -0.1f, 0.1f);

    DevBuf<T> d_inp(inp), d_w(w), d_bias(bias), d_out(nout), d_pre(nout), d_dout(dout), d_prein(pre_in), d_dinp(nin),
        d_dw(dw0), d_db(db0);
    const T* bias_ptr = with_bias ? d_bias.ptr : nullptr;

    // forward
    std::vector<T> ref_out(nout), ref_pre(nout);
    matmul_forward_cpu(ref_out.data(), inp.data(), w.data(), with_bias ? bias.data() : nullptr, BT, C, OC,
                       gelu_fwd ? ref_pre.data() : nullptr);
    matmul_forward_cuda(ctx, d_out.ptr, d_inp.ptr, d_w.ptr, bias_ptr, BT, C, OC, gelu_fwd ? d_pre.ptr : nullptr);
    check_close(b, "matmul_forward out " + tag, d_out.download(), ref_out, ktol(C));
    if (gelu_fwd) check_close(b, "matmul_forward gelu_pre " + tag, d_pre.download(), ref_pre, ktol(C));

    // backward
    std::vector<T> ref_dinp(nin), ref_dw = dw0, ref_db = db0;
    matmul_backward_cpu(ref_dinp.data(), ref_dw.data(), with_bias ? ref_db.data() : nullptr, dout.data(), inp.data(),
                        w.data(), BT, C, OC, gelu_bwd ? pre_in.data() : nullptr);
    matmul_backward_cuda(ctx, d_dinp.ptr, d_dw.ptr, with_bias ? d_db.ptr : nullptr, d_dout.ptr, d_inp.ptr, d_w.ptr, BT,
                         C, OC, gelu_bwd ? d_prein.ptr : nullptr, false);
    check_close(b, std::string("matmul_backward dinp") + (gelu_bwd ? " (x gelu')" : "") + " " + tag,
                d_dinp.download(), ref_dinp, ktol(OC));
    std::vector<T> g_dw = d_dw.download();
    check_close(b, "matmul_backward dweight (accumulated) " + tag, g_dw, ref_dw, ktol(BT));
    if (with_bias) {
        std::vector<T> g_db = d_db.download();
        check_close(b, "matmul_backward dbias (accumulated) " + tag, g_db, ref_db, ktol(BT));
        d_db.upload(db0);
        dbias_accumulate_cuda(ctx, d_db.ptr, d_dout.ptr, BT, OC);
        check_exact(b, "matmul_backward dbias rerun identical " + tag, d_db.download(), g_db);
        // the wide grid: another fixed order of the same sums
        d_db.upload(db0);
        dbias_accumulate_cuda(wide, d_db.ptr, d_dout.ptr, BT, OC, true);
        std::vector<T> w_db = d_db.download();
        check_close(b, "dbias, wide grid (accumulated) " + tag, w_db, ref_db, ktol(BT));
        d_db.upload(db0);
        dbias_accumulate_cuda(wide, d_db.ptr, d_dout.ptr, BT, OC, true);
        check_exact(b, "dbias, wide grid, rerun identical " + tag, d_db.download(), w_db);
    }

    if (timed && !b.check_only) {
        double flops = 2.0 * BT * C * OC;
        double ms = b.time_ms(ctx.stream, [&] {
            matmul_forward_cuda(ctx, d_out.ptr, d_inp.ptr, d_w.ptr, bias_ptr, BT, C, OC, gelu_fwd ? d_pre.ptr : nullptr);
        });
        printf("  %-58s %8.3f ms  %7.1f TFLOP/s\n", ("matmul_forward " + tag).c_str(), ms, flops / (ms * 1e-3) / 1e12);
        ms = b.time_ms(ctx.stream, [&] {
            matmul_backward_cuda(ctx, d_dinp.ptr, d_dw.ptr, with_bias ? d_db.ptr : nullptr, d_dout.ptr, d_inp.ptr,
                                 d_w.ptr, BT, C, OC, gelu_bwd ? d_prein.ptr : nullptr, false);
        });
        printf("  %-58s %8.3f ms  %7.1f TFLOP/s\n", ("matmul_backward " + tag).c_str(), ms,
               2 * flops / (ms * 1e-3) / 1e12);
        if (with_bias) {
            ms = b.time_ms(ctx.stream, [&] { dbias_accumulate_cuda(ctx, d_db.ptr, d_dout.ptr, BT, OC); });
            print_bw("  of which dbias " + tag, ms, (double)nout * sizeof(T));
            ms = b.time_ms(wide.stream, [&] { dbias_accumulate_cuda(wide, d_db.ptr, d_dout.ptr, BT, OC, true); });
            print_bw("  dbias, wide grid " + tag, ms, (double)nout * sizeof(T));
        }
    }
}

// Which fused epilogues cuBLASLt offers here (informational).
template <typename T>
void report_fusion(int BT, int C, int OC) {
    BenchCtx bc(BT, 768);
    DevBuf<T> inp((size_t)BT * C), w((size_t)OC * C), bias(OC), out((size_t)BT * OC), pre((size_t)BT * OC);
    bool fwd = lt_matmul(bc.ctx, out.ptr, (const T*)w.ptr, (const T*)inp.ptr, OC, BT, C, true, false, C, C, OC, 0.0f,
                         CUBLASLT_EPILOGUE_GELU_AUX_BIAS, (const T*)bias.ptr, (const T*)pre.ptr, (int64_t)OC);
    DevBuf<T> dinp((size_t)BT * C), prein((size_t)BT * C);
    bool bwd = lt_matmul(bc.ctx, dinp.ptr, (const T*)w.ptr, (const T*)out.ptr, C, BT, OC, false, false, C, OC, C, 0.0f,
                         CUBLASLT_EPILOGUE_DGELU, (const T*)nullptr, (const T*)prein.ptr, (int64_t)C);
    cudaCheck(cudaDeviceSynchronize());
    printf("  [%s] cuBLASLt GELU_AUX_BIAS: %s, DGELU: %s; fused GELU in use for %s: %s\n", tname<T>(),
           fwd ? "available" : "NOT available", bwd ? "available" : "NOT available", tname<T>(),
           lt_gelu_fusion_enabled<T>() && fwd ? "yes" : "no (own GELU kernels)");
}

template <typename T>
void test_all(Bench& b, bool timed) {
    const int BT = 8 * 1024, C = 768;
    report_fusion<T>(BT, C, 4 * C);
    test_matmul<T>(b, "qkv", BT, C, 3 * C, true, false, false, timed);
    test_matmul<T>(b, "attproj", BT, C, C, true, false, false, timed);
    test_matmul<T>(b, "fc+gelu", BT, C, 4 * C, true, true, false, timed);
    test_matmul<T>(b, "fcproj (gelu bwd)", BT, 4 * C, C, true, false, true, timed);
    // LM head (no bias): checked on 1024 rows (the CPU reference is slow), timed on all
    test_matmul<T>(b, "lm_head", timed && !b.check_only ? BT : 1024, C, 50304, false, false, false, timed);
    // small odd shapes; OC = 36 makes the GELU aux ld not divisible by 8 (fallback path)
    test_matmul<T>(b, "odd+gelu", 111, 200, 600, true, true, true, false);
    test_matmul<T>(b, "odd small", 37, 48, 36, true, true, true, false);
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    printf("GELU fusion: %s\n", getenv("ZERO_NO_GELU_FUSION") ? "disabled by ZERO_NO_GELU_FUSION" : "default");
    test_all<float>(b, true);
    test_all<bf16>(b, true);
    test_all<f16>(b, false);
    return b.finish();
}
