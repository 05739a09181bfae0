// The vocabulary-parallel embedding and cross-entropy of a tensor group, with t
// emulated ranks, against the whole-vocabulary kernels on one rank: the fused
// classifier (loss and dlogits) on random logits with extreme rows, and the
// encoder (forward and the gradients of wte and wpe).
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <vector>

#include "test/test_util.h"
#include "zero/base/rng.h"
#include "zero/comm/comm_emulated.h"
#include "zero/model/vocab_parallel.h"

// Logits (BT, Vp) with rows that stress the max and the sums: ordinary, wide,
// a huge target, a huge non-target held by another rank than the target's,
// all equal, near -FLT_MAX entries; the padding columns hold garbage the loss
// must ignore.
static std::vector<float> make_logits(int BT, int V, int Vp, std::vector<int>& targets, uint64_t seed) {
    std::vector<float> x((size_t)BT * Vp);
    targets.resize(BT);
    for (int i = 0; i < BT; i++) {
        float* row = x.data() + (size_t)i * Vp;
        int kind = i % 6;
        targets[i] = (int)(mix64(seed ^ (uint64_t)i) % (uint64_t)V);
        for (int v = 0; v < V; v++) {
            float z = random_normal(seed + 1, (uint64_t)i * Vp + v);
            row[v] = kind == 1 ? 60.0f * z : kind == 4 ? 3.0f : z;
            if (kind == 5 && v % 3 == 0) row[v] = -3e38f;
        }
        if (kind == 2) row[targets[i]] = 1e4f;
        if (kind == 3) {
            row[V - 1 - targets[i] % 7] = 1e4f;  // far from the target, at the other end of the vocabulary
            row[targets[i]] = -1e4f;
        }
        for (int v = V; v < Vp; v++) row[v] = 1e30f;  // padding: never part of the loss
    }
    return x;
}

static void check_cross_entropy(int t, int BT, int V, int Vp) {
    std::vector<int> targets;
    std::vector<float> full = make_logits(BT, V, Vp, targets, 1000 + t + V);
    const float dloss = 1.0f / 64;
    std::vector<float> ref = full, ref_losses(BT);
    fused_classifier_cpu(ref.data(), ref_losses.data(), targets.data(), BT, V, Vp, dloss);

    const int Vl = Vp / t;
    std::vector<float> dlogits((size_t)BT * Vp, NAN);
    std::vector<std::vector<float>> losses(t, std::vector<float>(BT));
    std::vector<std::vector<float>> eval_losses(t, std::vector<float>(BT));
    run_emulated_ranks(t, [&](int rank, EmulatedWorld& world) {
        KernelCtx ctx;
        EmulatedComm comm(world, rank, ctx);
        std::vector<float> mine((size_t)BT * Vl), scratch(vocab_parallel_scratch_floats(BT, t));
        for (int i = 0; i < BT; i++)
            for (int v = 0; v < Vl; v++) mine[(size_t)i * Vl + v] = full[(size_t)i * Vp + rank * Vl + v];
        std::vector<float> untouched = mine;
        // evaluation (dloss = 0) leaves the logits alone
        vocab_parallel_cross_entropy(ctx, comm, untouched.data(), eval_losses[rank].data(), targets.data(), BT, V,
                                     Vp, 0.0f, scratch.data());
        EXPECT(untouched == mine, "t=%d rank %d: an evaluation pass changed the logits", t, rank);
        vocab_parallel_cross_entropy(ctx, comm, mine.data(), losses[rank].data(), targets.data(), BT, V, Vp, dloss,
                                     scratch.data());
        for (int i = 0; i < BT; i++)
            for (int v = 0; v < Vl; v++) dlogits[(size_t)i * Vp + rank * Vl + v] = mine[(size_t)i * Vl + v];
        // the bytes: an all-gather of BT floats and an all-reduce of 2*BT floats per call
        uint64_t ag = (uint64_t)(t - 1) * BT * 4;
        EXPECT(comm.stats.sent[(int)CommOp::AllGather] == 2 * ag, "t=%d: all-gather bytes %llu", t,
               (unsigned long long)comm.stats.sent[(int)CommOp::AllGather]);
    });

    double worst_loss = 0.0, worst_d = 0.0;
    for (int i = 0; i < BT; i++) {
        for (int r = 0; r < t; r++)
            EXPECT(losses[r][i] == losses[0][i] && eval_losses[r][i] == losses[0][i],
                   "t=%d row %d: ranks disagree on the loss", t, i);
        double d = std::fabs((double)losses[0][i] - ref_losses[i]) / std::max(1.0, std::fabs((double)ref_losses[i]));
        worst_loss = std::max(worst_loss, d);
        for (int v = 0; v < Vp; v++) {
            double e = std::fabs((double)dlogits[(size_t)i * Vp + v] - ref[(size_t)i * Vp + v]) / dloss;
            worst_d = std::max(worst_d, e);
        }
    }
    // the sums of exponentials run in another order (per rank, then across the
    // group), so agreement is to float rounding, not to the bit
    EXPECT(worst_loss < 1e-6, "t=%d V=%d Vp=%d: loss differs by %.3g (relative)", t, V, Vp, worst_loss);
    EXPECT(worst_d < 1e-6, "t=%d V=%d Vp=%d: dlogits differ by %.3g of dloss", t, V, Vp, worst_d);
    printf("cross-entropy t=%d V=%d Vp=%d: loss within %.2g, dlogits within %.2g of dloss\n", t, V, Vp, worst_loss,
           worst_d);
}

static void check_embedding(int t) {
    const int B = 3, T_ = 8, C = 16, V = 200, Vp = 256, maxT = 10;
    std::vector<int> tokens(B * T_);
    for (int i = 0; i < B * T_; i++) tokens[i] = (int)(mix64(77 + i) % (i < 4 ? 3 : V));  // repeated tokens too
    std::vector<float> wte((size_t)Vp * C), wpe((size_t)maxT * C), dout((size_t)B * T_ * C);
    for (size_t i = 0; i < wte.size(); i++) wte[i] = i < (size_t)V * C ? random_normal(5, i) : 0.0f;
    for (size_t i = 0; i < wpe.size(); i++) wpe[i] = random_normal(6, i);
    for (size_t i = 0; i < dout.size(); i++) dout[i] = random_normal(7, i);
    std::vector<float> ref_out((size_t)B * T_ * C), ref_dwte((size_t)Vp * C, 0.5f), ref_dwpe((size_t)maxT * C, 0.25f);
    encoder_forward_cpu(ref_out.data(), tokens.data(), wte.data(), wpe.data(), B, T_, C);
    encoder_backward_cpu(ref_dwte.data(), ref_dwpe.data(), dout.data(), tokens.data(), B, T_, C);

    const int Vl = Vp / t;
    std::vector<float> dwte((size_t)Vp * C);
    run_emulated_ranks(t, [&](int rank, EmulatedWorld& world) {
        KernelCtx ctx;
        EmulatedComm comm(world, rank, ctx);
        std::vector<float> out((size_t)B * T_ * C), dwpe((size_t)maxT * C, 0.25f);
        std::vector<float> mine(wte.begin() + (size_t)rank * Vl * C, wte.begin() + (size_t)(rank + 1) * Vl * C);
        std::vector<float> dmine((size_t)Vl * C, 0.5f);
        vocab_parallel_embedding(ctx, comm, out.data(), tokens.data(), mine.data(), wpe.data(), B, T_, C, Vp);
        // adding zeros and swapping two addends are exact: the same bits as one rank
        EXPECT(out == ref_out, "t=%d rank %d: the embedding differs from the whole table's", t, rank);
        encoder_backward_vocab_cpu(dmine.data(), dwpe.data(), dout.data(), tokens.data(), B, T_, C, rank * Vl, Vl);
        EXPECT(dwpe == ref_dwpe, "t=%d rank %d: dwpe differs", t, rank);
        std::copy(dmine.begin(), dmine.end(), dwte.begin() + (size_t)rank * Vl * C);
    });
    EXPECT(dwte == ref_dwte, "t=%d: the ranks' dwte rows differ from the whole table's gradient", t);
}

int main() {
    for (int t : {1, 2, 4, 8}) check_cross_entropy(t, 48, 1000, 1024);
    // the last rank of four holds only padding columns: its max is -inf, its sums 0
    check_cross_entropy(4, 24, 600, 1024);
    check_cross_entropy(3, 24, 380, 384);
    for (int t : {1, 2, 4}) check_embedding(t);
    return test_summary("vocab_parallel");
}
