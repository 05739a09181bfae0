// Workbench: fused softmax + cross-entropy + dlogits (kernels/classifier.cuh)
// against kernels/cpu/classifier.h.
//   make -C dev/cuda classifier && ./dev/cuda/classifier [check]
// Losses are fp32 for every T and held to the fp32 rule (1e-5 of the largest
// loss); dlogits follow the rule of their dtype. The same checks, the same
// tolerances, hold the fast exponentials (ZERO_VARIANTS=fast_exp_classifier:
// __expf in both passes), at GPT-2's shape and the small ones; both are timed.
#include "dev/cuda/common.h"
#include "kernels/classifier.cuh"
#include "kernels/cpu/classifier.h"

template <typename T>
void test_classifier(Bench& b, int BT, int V, int Vp, bool timed, bool fast = false) {
    std::string tag = shape_str("[%s] BT=%d V=%d Vp=%d%s", tname<T>(), BT, V, Vp, fast ? ", __expf" : "");
    BenchCtx bc(BT, 768);
    const KernelCtx& ctx = bc;
    const size_t n = (size_t)BT * Vp;
    std::vector<T> logits = rand_vec<T>(n, 51, -6.0f, 6.0f);
    std::vector<int> targets = rand_ints(BT, 52, 0, V);
    const float dloss = 1.0f / BT;

    DevBuf<T> d_logits(logits);
    DevBuf<int> d_targets(targets);
    DevBuf<float> d_losses(BT);

    // evaluation (dloss = 0): losses only, logits untouched
    std::vector<T> ref_logits = logits;
    std::vector<float> ref_losses(BT);
    fused_classifier_cpu(ref_logits.data(), ref_losses.data(), targets.data(), BT, V, Vp, 0.0f);
    fused_classifier_cuda(ctx, d_logits.ptr, d_losses.ptr, d_targets.ptr, BT, V, Vp, 0.0f, fast);
    check_close(b, "fused_classifier losses (dloss=0) " + tag, d_losses.download(), ref_losses);
    check_exact(b, "fused_classifier logits untouched (dloss=0) " + tag, d_logits.download(), logits);

    // training: dlogits in place
    fused_classifier_cpu(ref_logits.data(), ref_losses.data(), targets.data(), BT, V, Vp, dloss);
    fused_classifier_cuda(ctx, d_logits.ptr, d_losses.ptr, d_targets.ptr, BT, V, Vp, dloss, fast);
    check_close(b, "fused_classifier losses " + tag, d_losses.download(), ref_losses);
    std::vector<T> g = d_logits.download();
    check_close(b, "fused_classifier dlogits " + tag, g, ref_logits);
    bool pad_zero = true;
    for (int i = 0; i < BT && pad_zero; i++)
        for (int v = V; v < Vp; v++)
            if (to_float(g[(size_t)i * Vp + v]) != 0.0f) pad_zero = false;
    b.record(pad_zero, "fused_classifier padding columns are 0 " + tag, "");

    if (timed && !b.check_only) {
        // the training pass overwrites its input: fresh logits before each run, outside the timed region
        std::vector<float> t;
        cudaEvent_t e0, e1;
        cudaCheck(cudaEventCreate(&e0));
        cudaCheck(cudaEventCreate(&e1));
        for (int r = 0; r < b.reps + 2; r++) {
            cudaCheck(cudaMemcpyAsync(d_logits.ptr, logits.data(), n * sizeof(T), cudaMemcpyHostToDevice, ctx.stream));
            b.flush_l2(ctx.stream);
            cudaCheck(cudaEventRecord(e0, ctx.stream));
            fused_classifier_cuda(ctx, d_logits.ptr, d_losses.ptr, d_targets.ptr, BT, V, Vp, dloss, fast);
            cudaCheck(cudaEventRecord(e1, ctx.stream));
            cudaCheck(cudaEventSynchronize(e1));
            float x;
            cudaCheck(cudaEventElapsedTime(&x, e0, e1));
            if (r >= 2) t.push_back(x);
        }
        cudaCheck(cudaEventDestroy(e0));
        cudaCheck(cudaEventDestroy(e1));
        std::sort(t.begin(), t.end());
        // minimal traffic: every logit read once and written once (pass 2 re-reads mostly from L2)
        print_bw("fused_classifier (train) " + tag, t[t.size() / 2], 2.0 * n * sizeof(T));
        double ms = b.time_ms(ctx.stream, [&] {
            fused_classifier_cuda(ctx, d_logits.ptr, d_losses.ptr, d_targets.ptr, BT, V, Vp, 0.0f, fast);
        });
        print_bw("fused_classifier (eval, loss only) " + tag, ms, 1.0 * n * sizeof(T));
    }
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    test_classifier<float>(b, 8 * 1024, 50257, 50304, true);
    test_classifier<bf16>(b, 8 * 1024, 50257, 50304, true);
    test_classifier<f16>(b, 8 * 1024, 50257, 50304, false);
    // small; Vp = 1001 is not a multiple of the pack (scalar kernel)
    for (int Vp : {1024, 1001}) {
        test_classifier<float>(b, 37, 999, Vp, false);
        test_classifier<bf16>(b, 37, 999, Vp, false);
        test_classifier<f16>(b, 37, 999, Vp, false);
    }
    // ZERO_VARIANTS=fast_exp_classifier
    test_classifier<float>(b, 8 * 1024, 50257, 50304, true, true);
    test_classifier<bf16>(b, 8 * 1024, 50257, 50304, true, true);
    for (int Vp : {1024, 1001}) {
        test_classifier<float>(b, 37, 999, Vp, false, true);
        test_classifier<bf16>(b, 37, 999, Vp, false, true);
        test_classifier<f16>(b, 37, 999, Vp, false, true);
    }
    return b.finish();
}
