// The independent oracle: our CPU build against GPT-2 written in PyTorch
// (dev/gpt2_reference.py), on a small config (2 layers, 4 heads, 64 channels,
// vocab 512, T 64, B 4). The reference is regenerated on every run from the
// model file this test writes, so nothing can be tuned to a frozen file.
//
//   logits and loss        within 1e-5 relative (to the largest |logit|, and the loss)
//   every gradient tensor  within 1e-4 relative (max |ours - torch| / max |torch|)
//   10 AdamW steps         each loss within 1e-5 relative, run by the trainer binary
//
// usage: test_oracle <train_gpt2_zero_cpu> <dev/gpt2_reference.py>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "test/trainer_run.h"
#include "zero/comm/comm_emulated.h"
#include "zero/model/gpt2.h"

int main(int argc, char** argv) {
    std::vector<std::string> args = test_args(argc, argv, "<train_gpt2_zero_cpu> <gpt2_reference.py>");
    const std::string trainer = args[0], script = args[1];
    if (run_command(reference_python() + " -c 'import torch'").status != 0) {
        fprintf(stderr, "PyTorch (Debian's python3-torch) is not installed: cannot regenerate the reference\n");
        return TEST_SKIP;
    }
    const int B = 4, T = 64, steps = 10;
    const float lr = 1e-3f, wd = 0.1f;
    GPT2Config cfg = gpt2_config_from_descriptor(TINY_T64);
    const int V = cfg.vocab_size, Vp = cfg.padded_vocab_size;
    std::string dir = "oracle";
    fresh_dir(dir);

    // one batch: a stream of B*T+1 tokens (the trainer's loader reads it the same way)
    write_markov_shard(dir + "/batch.bin", V, (size_t)B * T + 1, 11);
    std::vector<int> inputs, targets;
    first_batch(dir + "/batch.bin", B, T, dir + "/tokens.bin", inputs, targets);

    std::vector<float> logits((size_t)B * T * V), grads;
    double loss = 0.0;
    ParamLayout layout(cfg);
    run_emulated_ranks(1, [&](int rank, EmulatedWorld& world) {
        KernelCtx comm_ctx;
        EmulatedComm comm(world, rank, comm_ctx);
        MemoryAccountant mem(rank);
        KernelCtx ctx = create_kernel_ctx(mem, (size_t)B * T, cfg.channels, cfg.num_heads);
        ZeroConfig zc;
        zc.stage = 0;
        zc.seed = 1234;
        ZeroEngine<float> zero(layout, comm, mem, ctx, zc);
        GPT2<float> model(zero, B, T, 0, false, mem);
        zero.init_parameters(1234);
        ModelFileWriter<float> writer(dir + "/model.bin", layout);
        for (int u = 0; u < layout.num_units(); u++) {
            writer.write_unit(u, zero.acquire_params_for_export(u));
            zero.release_params_after_export(u);
        }
        writer.commit();

        // logits: an evaluation pass leaves them in place
        model.forward(inputs.data(), targets.data(), B, T, 0.0f);
        loss = model.read_loss_sum(false) / (B * T);
        for (int i = 0; i < B * T; i++)
            for (int v = 0; v < V; v++) logits[(size_t)i * V + v] = model.acts.logits[(size_t)i * Vp + v];
        // gradients of the mean loss
        model.forward(inputs.data(), targets.data(), B, T, 1.0f / (B * T));
        model.backward(0);
        const float* g = zero.full_gradients();
        grads.assign(layout.file_numel(), 0.0f);
        for (int u = 0; u < layout.num_units(); u++)
            for (const TensorSpec& t : layout.unit_spec(u).tensors)
                std::copy(g + zero.plan.full_offset[u] + t.offset_in_unit,
                          g + zero.plan.full_offset[u] + t.offset_in_unit + t.numel,
                          grads.begin() + layout.file_offset(t.id, t.layer));
        destroy_kernel_ctx(ctx);
    });

    char flags[160];
    snprintf(flags, sizeof(flags), " --steps %d --lr %g --wd %g --clip 1.0", steps, lr, wd);
    CommandResult ref_run = run_command(reference_python() + " " + script + " " + dir + "/model.bin " + dir + "/tokens.bin " +
                                        dir + "/reference.bin" + flags);
    EXPECT(ref_run.status == 0, "the PyTorch reference failed:\n%s", ref_run.output.c_str());
    if (ref_run.status != 0) return test_summary("oracle");
    printf("%s", ref_run.output.c_str());
    FILE* f = open_file(dir + "/reference.bin", "rb");
    std::vector<float> ref(1 + logits.size() + grads.size() + steps);
    read_exact(f, ref.data(), ref.size() * sizeof(float), dir + "/reference.bin");
    fclose(f);
    const float* ref_loss = ref.data();
    const float* ref_logits = ref_loss + 1;
    const float* ref_grads = ref_logits + logits.size();
    const float* ref_losses = ref_grads + grads.size();

    // logits and loss
    double max_ref = 0, max_diff = 0;
    for (size_t i = 0; i < logits.size(); i++) {
        max_ref = std::max(max_ref, (double)std::fabs(ref_logits[i]));
        max_diff = std::max(max_diff, (double)std::fabs(logits[i] - ref_logits[i]));
    }
    double logit_err = max_diff / max_ref, loss_err = std::fabs(loss - ref_loss[0]) / ref_loss[0];
    printf("logits: max |ours - torch| / max |torch| = %.3g; loss %.7f vs %.7f (%.3g)\n", logit_err, loss, ref_loss[0],
           loss_err);
    EXPECT(logit_err <= 1e-5, "logits differ by %.3g relative", logit_err);
    EXPECT(loss_err <= 1e-5, "loss differs by %.3g relative", loss_err);

    // every gradient tensor
    double worst = 0;
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        for (int l = 0; l < layout.copies(t); l++) {
            size_t off = layout.file_offset(t, l), n = layout.numel(t);
            double mref = 0, mdiff = 0;
            for (size_t i = off; i < off + n; i++) {
                mref = std::max(mref, (double)std::fabs(ref_grads[i]));
                mdiff = std::max(mdiff, (double)std::fabs(grads[i] - ref_grads[i]));
            }
            double err = mref > 0 ? mdiff / mref : mdiff;
            worst = std::max(worst, err);
            EXPECT(mref > 0, "gradient of %s[%d] is zero in the reference", param_tensor_name(t), l);
            EXPECT(err <= 1e-4, "gradient of %s[%d] differs by %.3g relative", param_tensor_name(t), l, err);
        }
    printf("gradients: worst tensor max |ours - torch| / max |torch| = %.3g\n", worst);

    // 10 AdamW steps by the trainer itself, from the same model file and batch
    TrainerRun adamw(trainer);
    adamw.model = dir + "/model.bin";
    adamw.train = dir + "/batch.bin";
    adamw.micro_batch = B;
    adamw.seq_len = T;
    adamw.steps = steps;
    adamw.out = dir + "/run";
    char optimizer[96];  // the reference's hyperparameters
    snprintf(optimizer, sizeof(optimizer), "-l %g -c %g --grad_clip 1", lr, wd);
    adamw.extra = optimizer;
    const std::vector<double> losses = adamw.run().train_losses;
    EXPECT((int)losses.size() == steps, "%zu losses in main.log", losses.size());
    double worst_step = 0;
    for (size_t i = 0; i < losses.size() && (int)i < steps; i++) {
        double err = std::fabs(losses[i] - ref_losses[i]) / ref_losses[i];
        worst_step = std::max(worst_step, err);
        EXPECT(err <= 1e-5, "step %zu: loss %.6f, torch %.6f (%.3g relative)", i + 1, losses[i], ref_losses[i], err);
    }
    printf("AdamW steps: losses %.6f .. %.6f, worst relative difference %.3g\n", losses.empty() ? 0 : losses.front(),
           losses.empty() ? 0 : losses.back(), worst_step);
    return test_summary("oracle");
}
