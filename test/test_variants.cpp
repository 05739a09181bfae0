// The prepared speed variants (zero/base/variants.h, ZERO_VARIANTS=...), held
// on the CPU build where their arithmetic is shared with the GPU's:
//   - the switch: names parsed, an unknown one refused with one line;
//   - fused_optimizer and residual_ln: the trainer with them on ends with the
//     same model, byte for byte, and the same losses as with them off, over
//     stages 0-3, fp32 and bf16, gradient accumulation, recomputation with
//     activation offload, tensor parallelism with Pa and with sp, pipelines,
//     and optimizer offload (where fused_optimizer does not apply);
//   - device_loss: the same model, the losses within the printed digits; its
//     fixed tree (loss_total_cpu, the CUDA kernel's reference) against the
//     tree restated here;
//   - encoder_split: the twin's split sums against the split restated here,
//     the default where no run is long; through the trainer on tokens with one
//     very frequent token: taken (other bits than the default), reproducible,
//     and a pipeline equal to one stage bit for bit;
//   - the one-launch optimizer twins against the per-piece calls;
//   - the dry run and the step-time model with the variants: fewer operations
//     a step, timed on a profile calibrated without them.
// Runs train with weight decay (the default has none), so that a piece's
// decay flag shows.
//
// usage: test_variants <path to train_gpt2_zero_cpu>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/encoder.h"
#include "kernels/cpu/reduce.h"
#include "test/trainer_run.h"
#include "zero/base/variants.h"

// the variant switch itself
static void check_parse() {
    std::string bad;
    unsigned all = parse_variants(" fused_optimizer,residual_ln ,device_loss,,encoder_split,fast_exp_classifier,"
                                  "dbias_blocks", bad);
    EXPECT(bad.empty() && all == (1u << (unsigned)Variant::Count) - 1, "all six: bits %x, bad '%s'", all, bad.c_str());
    EXPECT(parse_variants("", bad) == 0 && bad.empty(), "an empty list is none");
    EXPECT(parse_variants("residual_ln", bad) == 1u << (unsigned)Variant::ResidualLn, "residual_ln alone");
    EXPECT(parse_variants("residual_ln,fused", bad) == 0 && bad == "fused", "a prefix is no name: bad '%s'",
           bad.c_str());
}

// loss_total_cpu: lanes of every 1024th element, then 32-lane butterflies; at
// lane 0 a butterfly is the halving tree: v[l] += v[l + off] for off = 16 .. 1
static void check_loss_total() {
    for (size_t n : {0, 1, 7, 1000, 1024, 1025, 70001}) {
        // values of both signs over 2^-20 .. 2^40, so that sums of doubles round and cancel and their
        // order shows in the bits (losses of one size add up exactly in any order, hiding a wrong tree)
        std::vector<float> x(n);
        double magnitude = 0.0;
        for (size_t i = 0; i < n; i++) {
            x[i] = (random_u32(43, i) & 1 ? -1.0f : 1.0f) *
                   ldexpf(0.5f + random_uniform(41, i), (int)(random_u32(42, i) % 61) - 20);
            magnitude += std::fabs(x[i]);
        }
        std::vector<double> lane(1024, 0.0);
        for (size_t i = 0; i < n; i++) lane[i % 1024] += (double)x[i];
        auto halving = [](double* v) {
            for (int off = 16; off > 0; off >>= 1)
                for (int l = 0; l < off; l++) v[l] += v[l + off];
            return v[0];
        };
        double warps[32];
        for (int w = 0; w < 32; w++) warps[w] = halving(lane.data() + 32 * w);
        const double want = halving(warps), got = loss_total_cpu(x.data(), n);
        double plain = 0.0;
        for (float f : x) plain += f;
        EXPECT(memcmp(&got, &want, sizeof(double)) == 0, "n %zu: loss_total_cpu %.17g, the tree %.17g", n, got, want);
        // two orders of n terms differ by at most 2 n 2^-53 of the sum of their magnitudes
        EXPECT(std::fabs(got - plain) <= 2.0 * n * std::ldexp(1.0, -53) * magnitude,
               "n %zu: %.17g vs the plain sum %.17g", n, got, plain);
        if (n >= 1000)
            EXPECT(got != plain, "n %zu: the tree's sum is the plain loop's: the data cannot tell orders", n);
    }
}

// encoder_backward_cpu with split: each run of more than `split` positions in
// pieces of `split`, each summed from zero, the pieces added in order
template <typename T>
static void check_encoder_split() {
    const int B = 3, T_ = 400, C = 24, V = 50, BT = B * T_, split = ENCODER_SPLIT_RUN;
    std::vector<int> tokens(BT);
    for (int i = 0; i < BT; i++)  // token 7 at 2 of 3 positions (800 of 1200: 4 pieces), the rest spread
        tokens[i] = i % 3 ? 7 : (int)(random_u32(43, i) % V);
    std::vector<T> dout(BT * C), dwte0(V * C), dwpe0(T_ * C);
    for (int i = 0; i < BT * C; i++) dout[i] = from_float<T>(random_uniform(44, i) - 0.5f);
    for (int i = 0; i < V * C; i++) dwte0[i] = from_float<T>(0.1f * random_uniform(45, i));
    for (int i = 0; i < T_ * C; i++) dwpe0[i] = from_float<T>(0.1f * random_uniform(46, i));

    std::vector<T> want = dwte0;
    for (int v = 0; v < V; v++) {
        std::vector<int> at;
        for (int i = 0; i < BT; i++)
            if (tokens[i] == v) at.push_back(i);
        if (at.empty()) continue;
        const int pieces = (int)at.size() > split ? ((int)at.size() + split - 1) / split : 1;
        const int len = (int)at.size() > split ? split : (int)at.size();
        for (int c = 0; c < C; c++) {
            float total = 0.0f;
            for (int k = 0; k < pieces; k++) {
                float part = 0.0f;
                for (int j = k * len; j < std::min((int)at.size(), (k + 1) * len); j++)
                    part += to_float(dout[(size_t)at[j] * C + c]);
                total = pieces == 1 ? part : total + part;
            }
            T& w = want[(size_t)v * C + c];
            w = from_float<T>(to_float(w) + to_float(from_float<T>(total)));
        }
    }
    std::vector<T> got = dwte0, got_pe = dwpe0, plain = dwte0, plain_pe = dwpe0;
    encoder_backward_cpu(got.data(), got_pe.data(), dout.data(), tokens.data(), B, T_, C, 0, INT_MAX, split);
    encoder_backward_cpu(plain.data(), plain_pe.data(), dout.data(), tokens.data(), B, T_, C);
    EXPECT(memcmp(got.data(), want.data(), got.size() * sizeof(T)) == 0, "[%s] split dwte differs from the split sums",
           dtype_name(dtype_of<T>::value));
    EXPECT(memcmp(got_pe.data(), plain_pe.data(), got_pe.size() * sizeof(T)) == 0, "[%s] dwpe is not split",
           dtype_name(dtype_of<T>::value));
    // the rows of the short runs are the default's; the long run's is another sum
    bool short_same = true;
    for (int v = 0; v < V; v++)
        if (v != 7) short_same &= memcmp(&got[v * C], &plain[v * C], C * sizeof(T)) == 0;
    EXPECT(short_same, "[%s] a short run's row differs from the default's", dtype_name(dtype_of<T>::value));
    // a split longer than every run is the default
    std::vector<T> wide = dwte0, wide_pe = dwpe0;
    encoder_backward_cpu(wide.data(), wide_pe.data(), dout.data(), tokens.data(), B, T_, C, 0, INT_MAX, BT);
    EXPECT(memcmp(wide.data(), plain.data(), wide.size() * sizeof(T)) == 0, "[%s] split > every run: not the default",
           dtype_name(dtype_of<T>::value));
}

// the one-launch optimizer's twins against the per-piece calls they replace
static void check_piece_twins() {
    const size_t n = 3000;
    std::vector<float> g(n), master(n), m(n), v(n);
    for (size_t i = 0; i < n; i++)
        g[i] = random_uniform(47, i) - 0.5f, master[i] = random_uniform(48, i), m[i] = 0.01f * g[i], v[i] = 1e-4f;
    std::vector<bf16> param(n), param_ref(n);
    // pieces [0, 1000) with decay, [1000, 1000) empty, [1000, 2999) without, the last element left out
    std::vector<OptPiece<bf16>> pieces;
    std::vector<bf16> gb(n);
    for (size_t i = 0; i < n; i++) gb[i] = from_float<bf16>(g[i]);
    pieces.push_back({gb.data(), param.data(), 0, 1000, 5000, 1, 0, 0});
    pieces.push_back({gb.data() + 1000, param.data() + 1000, 1000, 0, 6000, 1, 0, 0});
    pieces.push_back({gb.data() + 1000, param.data() + 1000, 1000, 1999, 7000, 0, 0, 0});
    AdamWStep s{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 0.1f, 0.05f, 99};
    std::vector<float> w1 = master, m1 = m, v1 = v, w2 = master, m2 = m, v2 = v;
    adamw_pieces_cpu(pieces.data(), 3, w1.data(), m1.data(), v1.data(), s);
    AdamWStep nodecay = s;
    nodecay.weight_decay = 0.0f;
    adamw_cpu(w2.data(), m2.data(), v2.data(), gb.data(), param_ref.data(), 1000, s, 5000);
    adamw_cpu(w2.data() + 1000, m2.data() + 1000, v2.data() + 1000, gb.data() + 1000, param_ref.data() + 1000, 1999,
              nodecay, 7000);
    EXPECT(memcmp(w1.data(), w2.data(), n * 4) == 0 && memcmp(m1.data(), m2.data(), n * 4) == 0 &&
               memcmp(v1.data(), v2.data(), n * 4) == 0 && memcmp(param.data(), param_ref.data(), n * 2) == 0,
           "adamw_pieces_cpu differs from adamw_cpu piece by piece");
    float sums[3];
    sumsq_pieces_cpu(sums, pieces.data(), 3);
    EXPECT(sums[0] == (float)sumsq_cpu(gb.data(), 1000) && sums[1] == 0.0f &&
               sums[2] == (float)sumsq_cpu(gb.data() + 1000, 1999),
           "sumsq_pieces_cpu differs from sumsq_cpu piece by piece");
}

// A trainer run with ZERO_VARIANTS set (empty: none).
static TrainerRun with_variants(TrainerRun run, const std::string& variants) {
    run.trainer = "ZERO_VARIANTS=" + (variants.empty() ? std::string("''") : variants) + " " + run.trainer;
    return run;
}

// The run with `variants` on against the same run without: the final model
// byte for byte and every step's loss (device_loss: within the printed 6 decimals).
static void expect_same(const TrainerRun& run, const std::string& variants, const std::string& what) {
    TrainerRun off = with_variants(run, ""), on = with_variants(run, variants);
    off.out += "_off", on.out += "_on";
    RunResult a = off.run(), b = on.run();
    const bool exact = variants.find("device_loss") == std::string::npos;
    EXPECT(b.output.find("variants on (ZERO_VARIANTS): " + variants) != std::string::npos,
           "%s: no variants line:\n%s", b.command.c_str(), b.output.c_str());
    EXPECT(a.steps.size() == (size_t)*run.steps && b.steps.size() == a.steps.size(), "%s: %zu and %zu step lines",
           what.c_str(), a.steps.size(), b.steps.size());
    for (size_t i = 0; i < a.steps.size() && i < b.steps.size(); i++)
        EXPECT(exact ? a.steps[i].loss == b.steps[i].loss : std::fabs(a.steps[i].loss - b.steps[i].loss) <= 1.5e-6,
               "%s, %s: step %zu loss %.6f on, %.6f off", what.c_str(), variants.c_str(), i + 1, b.steps[i].loss,
               a.steps[i].loss);
    EXPECT(files_identical(a.model_at(*run.steps), b.model_at(*run.steps)), "%s, %s: the models differ (%s, %s)",
           what.c_str(), variants.c_str(), a.model_at(*run.steps).c_str(), b.model_at(*run.steps).c_str());
    printf("%-58s %s: %s\n", what.c_str(), variants.c_str(),
           exact ? "bit-identical" : "same model, losses within 1.5e-6");
}

int main(int argc, char** argv) {
    check_parse();
    check_loss_total();
    check_encoder_split<float>();
    check_encoder_split<bf16>();
    check_piece_twins();

    TrainerRun base(trainer_from_args(argc, argv));
    const std::string dir = "variants";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 5);
    base.model = TINY;
    base.train = dir + "/train.bin";
    base.seq_len = 32;
    base.steps = 3;
    base.extra = "--seed 11 -c 0.1";  // weight decay on (the default is none): pieces with and without it

    expect_one_line_error(with_variants(base, "residual_ln,fast_exp"), "", 1, "unknown variant 'fast_exp'");

    struct Config {
        const char* name;
        int ranks, stage, micro_batch;
        const char* precision;
        const char* flags;
    };
    const Config configs[] = {
        {"z0 fp32 2 ranks", 2, 0, 4, "fp32", ""},
        {"z1 bf16 2 ranks", 2, 1, 4, "bf16", ""},
        {"z2 bf16 2 ranks, 2 micro-steps", 2, 2, 2, "bf16", "-d 256"},
        {"z3 bf16 2 ranks, -r 2, activation offload", 2, 3, 4, "bf16", "-r 2 --offload_activations 1"},
        {"z3 bf16 tp 2 x dp 2, -r 2 (Pa)", 4, 3, 4, "bf16", "--tp 2 -r 2"},
        {"z1 fp32 tp 2, sp", 2, 1, 4, "fp32", "--tp 2 --sp 1"},
        {"z2 bf16 pp 2, 2 micro-batches", 2, 2, 2, "bf16", "--pp 2 -d 128"},
        {"z1 bf16 pp 2 x tp 2, -r 1", 4, 1, 4, "bf16", "--pp 2 --tp 2 -r 1"},
        {"z2 bf16 optimizer offload", 1, 2, 4, "bf16", "--offload_optimizer cpu"},
    };
    for (const Config& c : configs) {
        TrainerRun run = base;
        run.ranks = c.ranks, run.stage = c.stage, run.micro_batch = c.micro_batch, run.precision = c.precision;
        run.extra += std::string(" ") + c.flags;
        run.out = dir + "/" + std::to_string(&c - configs);
        expect_same(run, "fused_optimizer,residual_ln", c.name);
    }
    for (int k : {1, 6}) {  // the loss summed on the device, alone and at a pipeline's last stage
        const Config& c = configs[k];
        TrainerRun run = base;
        run.ranks = c.ranks, run.stage = c.stage, run.micro_batch = c.micro_batch, run.precision = c.precision;
        run.extra += std::string(" ") + c.flags;
        run.out = dir + "/loss" + std::to_string(k);
        expect_same(run, "device_loss", c.name);
    }

    // the dry run records the one-launch kernels, and the step-time model times them on a profile
    // calibrated without them (as the kernels they replace over the same bytes)
    const std::string root = base.trainer.substr(0, base.trainer.find_last_of('/') + 1);
    auto predict = [&](const std::string& variants) {
        TrainerRun p = with_variants(base, variants);
        p.model = "d12", p.train = "", p.steps.reset(), p.micro_batch = 4, p.seq_len = 1024;
        p.extra = "-z 1 -p bf16 --predict " + root + "zero/perf/profiles/h100_measured.json";
        RunResult r = p.run();
        int ops = -1;
        double step = -1;
        size_t at = r.output.find("operations a step");
        if (at != std::string::npos) ops = atoi(r.output.c_str() + r.output.rfind(' ', r.output.rfind(' ', at) - 1));
        at = r.output.find("  step ");
        if (at != std::string::npos) step = atof(r.output.c_str() + at + 7);
        return std::make_pair(ops, step);
    };
    auto plain_ops = predict(""), fused_ops = predict("fused_optimizer,residual_ln,device_loss");
    EXPECT(plain_ops.first > 0 && fused_ops.first > 0 && fused_ops.first < plain_ops.first / 2,
           "the dry run's operations a step: %d without the variants, %d with", plain_ops.first, fused_ops.first);
    EXPECT(plain_ops.second > 0 && fused_ops.second > 0 && fused_ops.second < plain_ops.second,
           "the predicted step: %.5f s without the variants, %.5f s with", plain_ops.second, fused_ops.second);
    printf("--predict d12 B 4: %d operations a step, %.5f s; with the variants %d, %.5f s\n", plain_ops.first,
           plain_ops.second, fused_ops.first, fused_ops.second);

    // encoder_split through the trainer: 512 tokens a micro-batch, 5 in 7 of them one token (longer than a split run)
    std::vector<uint16_t> skewed(20000);
    for (size_t i = 0; i < skewed.size(); i++) skewed[i] = i % 7 < 5 ? 3 : (uint16_t)(random_u32(49, i) % TINY_VOCAB);
    write_shard(dir + "/skewed.bin", skewed.data(), skewed.size());
    TrainerRun enc = base;
    enc.train = dir + "/skewed.bin", enc.micro_batch = 16, enc.precision = "fp32", enc.stage = 1;
    auto enc_run = [&](const std::string& variants, const std::string& name, const std::string& flags) {
        TrainerRun r = with_variants(enc, variants);
        r.out = dir + "/enc_" + name;
        r.extra += " " + flags;
        r.ranks = flags.find("--pp 2") != std::string::npos ? 2 : 1;
        return r.run();
    };
    RunResult plain = enc_run("", "plain", ""), split = enc_run("encoder_split", "split", ""),
              again = enc_run("encoder_split", "again", ""), piped = enc_run("encoder_split", "pp2", "--pp 2");
    const std::string at = split.model_at(3);
    EXPECT(!files_identical(plain.model_at(3), at), "encoder_split: the model is the default's: no run was split");
    EXPECT(files_identical(again.model_at(3), at), "encoder_split: two runs differ");
    EXPECT(files_identical(piped.model_at(3), at), "encoder_split: --pp 2 differs from --pp 1");
    printf("encoder_split: taken, reproducible, --pp 2 = --pp 1 bit for bit\n");
    return test_summary("variants");
}
