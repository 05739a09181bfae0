// Workbench: encoder forward/backward (kernels/encoder.cuh) against
// kernels/cpu/encoder.h. Both directions do the CPU twin's fp32 operations in
// the same order (the backward sums each token's positions in (b,t) order
// starting from the existing gradient), so the checks are bit-for-bit.
// The split runs (ZERO_VARIANTS=encoder_split: a run of more than 256
// positions summed in pieces) against the twin's split, bit for bit too, at
// the trainer's B 64 x T 1024, at ragged shapes, and with one token at 20%
// and at 60% of the positions; timed beside the default.
//   make -C dev/cuda encoder && ./dev/cuda/encoder [check]
#include "dev/cuda/common.h"
#include "kernels/cpu/encoder.h"
#include "kernels/encoder.cuh"

// tokens with heavy repetition (like end-of-text and common words) so that
// some buckets are long and many are short; `heavy` tenths of them one token
std::vector<int> skewed_tokens(size_t n, uint64_t seed, int V, uint32_t heavy = 2) {
    std::vector<int> t(n);
    for (size_t i = 0; i < n; i++) {
        uint32_t r = random_u32(seed, 2 * i);
        uint32_t u = random_u32(seed, 2 * i + 1);
        if (r % 10 < heavy) t[i] = V - 1;                // 20%: one very common token
        else if (r % 10 < heavy + 4) t[i] = (int)(u % 64);  // 40%: 64 common tokens
        else t[i] = (int)(u % (uint32_t)V);              // the rest anywhere
    }
    return t;
}

// split: the encoder backward's split run (0: the default); heavy: tenths of the positions one token
template <typename T>
void test_encoder(Bench& b, int B, int T_, int C, int V, int Vp, bool timed, int split = 0, uint32_t heavy = 2) {
    std::string tag = shape_str("[%s] B=%d T=%d C=%d, one token at %u0%%%s", tname<T>(), B, T_, C, heavy,
                                split ? shape_str(", split %d", split).c_str() : "");
    const int BT = B * T_, maxT = T_ + 3;
    BenchCtx bc(BT, C, split);
    const KernelCtx& ctx = bc;
    std::vector<int> tokens = skewed_tokens(BT, 21, V, heavy);
    std::vector<int> tokens2 = skewed_tokens(BT, 22, V, heavy);
    std::vector<T> wte = rand_vec<T>((size_t)Vp * C, 23);
    std::vector<T> wpe = rand_vec<T>((size_t)maxT * C, 24);
    std::vector<T> dout = rand_vec<T>((size_t)BT * C, 25);
    std::vector<T> dout2 = rand_vec<T>((size_t)BT * C, 26);
    std::vector<T> dwte0 = rand_vec<T>((size_t)Vp * C, 27, -0.1f, 0.1f);
    std::vector<T> dwpe0 = rand_vec<T>((size_t)maxT * C, 28, -0.1f, 0.1f);

    // forward
    std::vector<T> ref_out((size_t)BT * C);
    encoder_forward_cpu(ref_out.data(), tokens.data(), wte.data(), wpe.data(), B, T_, C);
    DevBuf<int> d_tok(tokens), d_tok2(tokens2);
    DevBuf<T> d_wte(wte), d_wpe(wpe), d_out((size_t)BT * C);
    encoder_forward_cuda(ctx, d_out.ptr, d_tok.ptr, d_wte.ptr, d_wpe.ptr, B, T_, C);
    check_exact(b, "encoder_forward out " + tag, d_out.download(), ref_out);

    // backward, twice in a row before any sync (the second call reuses the
    // pinned staging buffer while the first copy may still be queued)
    std::vector<T> ref_dwte = dwte0, ref_dwpe = dwpe0;
    encoder_backward_cpu(ref_dwte.data(), ref_dwpe.data(), dout.data(), tokens.data(), B, T_, C, 0, INT_MAX, split);
    encoder_backward_cpu(ref_dwte.data(), ref_dwpe.data(), dout2.data(), tokens2.data(), B, T_, C, 0, INT_MAX, split);
    DevBuf<T> d_dwte(dwte0), d_dwpe(dwpe0), d_dout(dout), d_dout2(dout2);
    encoder_backward_cuda(ctx, d_dwte.ptr, d_dwpe.ptr, d_dout.ptr, d_tok.ptr, tokens.data(), B, T_, C, split);
    encoder_backward_cuda(ctx, d_dwte.ptr, d_dwpe.ptr, d_dout2.ptr, d_tok2.ptr, tokens2.data(), B, T_, C, split);
    std::vector<T> g_dwte = d_dwte.download(), g_dwpe = d_dwpe.download();
    check_exact(b, "encoder_backward dwte (2 calls) " + tag, g_dwte, ref_dwte);
    check_exact(b, "encoder_backward dwpe (2 calls) " + tag, g_dwpe, ref_dwpe);

    // reproducible: the same again from the same start gives the same bits
    d_dwte.upload(dwte0), d_dwpe.upload(dwpe0);
    encoder_backward_cuda(ctx, d_dwte.ptr, d_dwpe.ptr, d_dout.ptr, d_tok.ptr, tokens.data(), B, T_, C, split);
    encoder_backward_cuda(ctx, d_dwte.ptr, d_dwpe.ptr, d_dout2.ptr, d_tok2.ptr, tokens2.data(), B, T_, C, split);
    check_exact(b, "encoder_backward dwte rerun identical " + tag, d_dwte.download(), g_dwte);

    if (timed && !b.check_only) {
        double ms = b.time_ms(ctx.stream, [&] {
            encoder_forward_cuda(ctx, d_out.ptr, d_tok.ptr, d_wte.ptr, d_wpe.ptr, B, T_, C);
        });
        print_bw("encoder_forward " + tag, ms, 3.0 * BT * C * sizeof(T));
        // distinct tokens: each dwte row read + written once
        std::vector<int> s = tokens;
        std::sort(s.begin(), s.end());
        size_t distinct = std::unique(s.begin(), s.end()) - s.begin();
        ms = b.time_ms(ctx.stream, [&] {
            encoder_backward_cuda(ctx, d_dwte.ptr, d_dwpe.ptr, d_dout.ptr, d_tok.ptr, tokens.data(), B, T_, C, split);
        });
        print_bw(shape_str("encoder_backward (incl. host bucketing, %zu tokens) ", distinct) + tag, ms,
                 (double)sizeof(T) * C * (2.0 * BT + 2.0 * (distinct + T_)));
    }
}

int main(int argc, char** argv) {
    Bench b(argc, argv);
    test_encoder<float>(b, 8, 1024, 768, 50257, 50304, true);
    test_encoder<bf16>(b, 8, 1024, 768, 50257, 50304, true);
    test_encoder<f16>(b, 8, 1024, 768, 50257, 50304, false);
    // small odd shapes; C=100 is not a multiple of the 16-bit pack (scalar kernels)
    for (int C : {200, 100}) {
        test_encoder<float>(b, 3, 37, C, 1000, 1024, false);
        test_encoder<bf16>(b, 3, 37, C, 1000, 1024, false);
        test_encoder<f16>(b, 3, 37, C, 1000, 1024, false);
    }
    // ZERO_VARIANTS=encoder_split: the trainer's B 64 (13k positions of one token: 52 pieces) beside the
    // default, B 8, one token at 60%, and the small shapes (3 x 37 at 60%: 66 positions, a split of 16)
    const int S = ENCODER_SPLIT_RUN;
    test_encoder<bf16>(b, 64, 1024, 768, 50257, 50304, true, 0);
    test_encoder<bf16>(b, 64, 1024, 768, 50257, 50304, true, S);
    test_encoder<float>(b, 8, 1024, 768, 50257, 50304, false, S);
    test_encoder<bf16>(b, 8, 1024, 768, 50257, 50304, true, S, 6);
    test_encoder<f16>(b, 8, 1024, 768, 50257, 50304, false, S, 6);
    for (int C : {200, 100}) {
        test_encoder<float>(b, 3, 37, C, 1000, 1024, false, 16, 6);
        test_encoder<bf16>(b, 3, 37, C, 1000, 1024, false, 16, 6);
    }
    return b.finish();
}
