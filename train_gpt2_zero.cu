// train_gpt2_zero: GPT-2 training with ZeRO stages 0-3, one file of model and
// loop. The same source builds the CUDA trainer (nvcc) and the CPU trainer
// (g++ -DZERO_CPU); only the kernels behind kernels/kernels.h differ.
//
// Reading guide:
//   GPT2::forward / GPT2::backward   the model as explicit call lists, unit by unit
//   zero/engine/zero_engine.h               what each ZeRO stage does at each unit hook
//   zero/layout/shard_plan.h                the offset arithmetic behind all of it
//   train_rank()                     the training loop of one rank
//   main()                           flags, world set-up (NCCL or emulated ranks)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "kernels/kernels.h"
#include "zero/layout/activations.h"
#include "zero/engine/checkpoint.h"
#include "zero/comm/comm_emulated.h"
#include "zero/run/fit_check.h"
#include "zero/run/flags.h"
#include "zero/engine/loss_scaler.h"
#include "zero/base/memory.h"
#include "zero/engine/memory_predictor.h"
#include "zero/layout/model_file.h"
#include "zero/layout/param_layout.h"
#include "zero/run/peak_flops.h"
#include "zero/run/reports.h"
#include "zero/run/run_setup.h"
#include "zero/engine/zero_engine.h"
#ifdef ZERO_CUDA
#include "zero/comm/comm_nccl.h"
#endif

// ----------------------------------------------------------------------------
// The model: GPT-2 forward and backward over the units of the flat buffer.
// Every parameter pointer comes from the ZeRO engine's hooks, which gather
// (stage 3), hand out gradient buffers and launch the stage's collectives.

template <typename T>
struct GPT2 {
    const GPT2Config cfg;
    const ParamLayout& layout;
    ZeroEngine<T>& zero;
    KernelCtx ctx;
    Activations<T> acts;
    // the current pass
    int B = 0, T_ = 0;
    const int* inputs_host = nullptr;  // the encoder backward buckets tokens on the host
    const T* head_params = nullptr;    // unit 0 held from the LM head's forward to its backward

    // Tokens go up through pinned host memory: a copy from the loader's pageable
    // buffer would be staged by the driver on the host's time. Two slots, so that
    // one batch's copy may still be in flight while the next is staged; a slot is
    // reused only after its event says the copy has landed. (B*T inputs, then
    // B*T targets; outside the accountant, like the loader's own buffers.)
    struct TokenSlot {
        int* host = nullptr;
        Event copied{};
        bool used = false;
    };
    TokenSlot token_slots[2];
    int next_token_slot = 0;

    GPT2(ZeroEngine<T>& z, int max_B, int max_T, int recompute, bool offload_activations, MemoryAccountant& mem)
        : cfg(z.layout.cfg),
          layout(z.layout),
          zero(z),
          ctx(z.ctx),
          acts(cfg, max_B, max_T, recompute, offload_activations, mem) {
        for (TokenSlot& t : token_slots) {
            t.host = (int*)host_malloc(2 * acts.maxBT * sizeof(int));
            t.copied = event_create();
        }
    }
    ~GPT2() {
        for (TokenSlot& t : token_slots) {
            event_sync(t.copied);
            event_destroy(t.copied);
            host_free(t.host);
        }
    }
    GPT2(const GPT2&) = delete;
    GPT2& operator=(const GPT2&) = delete;

    // (B, T) inputs and targets up to the device, on the compute stream.
    void upload_tokens(const int* inputs, const int* targets) {
        TokenSlot& t = token_slots[next_token_slot];
        next_token_slot ^= 1;
        if (t.used) event_sync(t.copied);  // its previous batch has reached the device
        memcpy(t.host, inputs, BT() * sizeof(int));
        device_copy(acts.inputs(), t.host, BT() * sizeof(int), ctx.stream);
        if (targets) {
            memcpy(t.host + acts.maxBT, targets, BT() * sizeof(int));
            device_copy(acts.targets(), t.host + acts.maxBT, BT() * sizeof(int), ctx.stream);
        }
        event_record(t.copied, ctx.stream);
        t.used = true;
    }

    size_t BT() const { return (size_t)B * T_; }

    // One transformer block: x (B,T,C) -> residual3 (B,T,C).
    void layer_forward(int l, const LayerTensors<const T>& p) {
        int C = cfg.channels, NH = cfg.num_heads;
        LayerActs<T> a = acts.layer(l, BT());
        const T* x = acts.layer_input(l, BT());
        T* branch = acts.branch;
        layernorm_forward(ctx, a.ln1, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, BT(), C);
        matmul_forward(ctx, a.qkv, a.ln1, p.qkvw, p.qkvb, BT(), C, 3 * C, (T*)nullptr);          // (B,T,3C)
        attention_forward(ctx, a.atty, a.att_lse, a.qkv, B, T_, C, NH);                          // (B,T,C)
        matmul_forward(ctx, branch, a.atty, p.attprojw, p.attprojb, BT(), C, C, (T*)nullptr);    // (B,T,C)
        residual_layernorm_forward(ctx, a.residual2, a.ln2, a.ln2_mean, a.ln2_rstd, x, branch, p.ln2w, p.ln2b,
                                   BT(), C);
        matmul_forward(ctx, a.fch_gelu, a.ln2, p.fcw, p.fcb, BT(), C, 4 * C, a.fch);            // (B,T,4C), GELU fused
        matmul_forward(ctx, branch, a.fch_gelu, p.fcprojw, p.fcprojb, BT(), 4 * C, C, (T*)nullptr);  // (B,T,C)
        residual_forward(ctx, a.residual3, a.residual2, branch, BT() * C);
    }

    // Backward of one block. acts.dresidual holds dL/d(residual3) on entry and
    // dL/d(x) on exit; g receives the block's parameter gradients (accumulated).
    void layer_backward(int l, const LayerTensors<const T>& p, const LayerTensors<T>& g) {
        int C = cfg.channels, NH = cfg.num_heads;
        LayerActs<T> a = acts.layer(l, BT());
        const T* x = acts.layer_input(l, BT());
        T* dres = acts.dresidual;
        T* dbtc = acts.dbtc;
        T* dqkv = acts.dqkv;
        T* dfch = acts.dfch;
        if (acts.recompute == 1) gelu_forward(ctx, a.fch_gelu, a.fch, BT() * 4 * C);
        // residual3 = residual2 + fcproj(gelu(fc(ln2)))
        matmul_backward(ctx, dfch, g.fcprojw, g.fcprojb, dres, a.fch_gelu, p.fcprojw, BT(), 4 * C, C, a.fch);
        matmul_backward(ctx, dbtc, g.fcw, g.fcb, dfch, a.ln2, p.fcw, BT(), C, 4 * C, (const T*)nullptr);
        layernorm_backward(ctx, dres, g.ln2w, g.ln2b, dbtc, a.residual2, p.ln2w, a.ln2_mean, a.ln2_rstd, BT(), C);
        // residual2 = x + attproj(attention(qkv(ln1)))
        matmul_backward(ctx, dbtc, g.attprojw, g.attprojb, dres, a.atty, p.attprojw, BT(), C, C, (const T*)nullptr);
        attention_backward(ctx, dqkv, dbtc, a.qkv, a.atty, a.att_lse, B, T_, C, NH);
        matmul_backward(ctx, dbtc, g.qkvw, g.qkvb, dqkv, a.ln1, p.qkvw, BT(), C, 3 * C, (const T*)nullptr);
        layernorm_backward(ctx, dres, g.ln1w, g.ln1b, dbtc, x, p.ln1w, a.ln1_mean, a.ln1_rstd, BT(), C);
    }

    // Forward over a (B, T) batch of tokens on the host. With targets, the
    // per-token losses are computed (acts.losses); with dloss != 0 (training)
    // the loss gradient replaces the logits and unit 0 stays held for backward.
    // Nothing is read back: the host does not wait for the device here.
    void forward(const int* inputs, const int* targets, int batch, int seq_len, float dloss) {
        B = batch, T_ = seq_len, inputs_host = inputs;
        bool training = dloss != 0.0f;
        int C = cfg.channels, L = cfg.num_layers;
        CHECK(BT() <= acts.maxBT && T_ <= cfg.max_seq_len, "internal: batch larger than the activations");
        upload_tokens(inputs, targets);
        acts.set_saved_live(true);
        zero.begin_pass(training);

        EmbedTensors<const T> emb = embed_tensors(layout, zero.acquire_params(layout.embed_unit()));
        encoder_forward(ctx, acts.encoded, acts.inputs(), emb.wte, emb.wpe, B, T_, C);  // (B,T,C)
        zero.release_params(layout.embed_unit());

        for (int l = 0; l < L; l++) {
            int u = layout.layer_unit(l);
            layer_forward(l, layer_tensors(layout, zero.acquire_params(u)));
            acts.save_layer_output(l, BT(), ctx.stream);
            zero.release_params(u);
        }

        float* lnf_mean = acts.lnf_stats;
        FinalTensors<const T> fin = final_tensors(layout, zero.acquire_params(layout.final_unit()));
        layernorm_forward(ctx, acts.lnf, lnf_mean, lnf_mean + BT(), acts.layer(L - 1, BT()).residual3,
                          fin.lnfw, fin.lnfb, BT(), C);
        zero.release_params(layout.final_unit());

        // the LM head shares wte with the embeddings: unit 0 is gathered again
        head_params = zero.acquire_params(layout.embed_unit());
        EmbedTensors<const T> head = embed_tensors(layout, head_params);
        matmul_forward(ctx, acts.logits, acts.lnf, head.wte, (const T*)nullptr, BT(), C,
                       cfg.padded_vocab_size, (T*)nullptr);  // (B,T,Vp)
        if (targets)
            fused_classifier(ctx, acts.logits, (float*)acts.losses, acts.targets(), BT(), cfg.vocab_size,
                             cfg.padded_vocab_size, dloss);
        if (!training) {
            zero.release_params(layout.embed_unit());
            zero.end_pass();
            acts.set_saved_live(false);
        }
    }

    // The per-token losses of the last forward, added into acts.loss_sums (the
    // running sum of a step's micro-steps), on the device.
    void add_losses(bool first) {
        accumulate(ctx, acts.loss_sums, (const float*)acts.losses, BT(), first);
    }
    // The sum of acts.loss_sums (or of the last forward's losses), read back.
    double read_loss_sum(bool accumulated) {
        std::vector<float> losses(BT());
        zero.copy_to_host(losses.data(), accumulated ? acts.loss_sums : acts.losses, BT() * sizeof(float));
        double sum = 0.0;
        for (float x : losses) sum += x;
        return sum;
    }

    // Backward of the last training forward. Gradients accumulate into the
    // buffers the engine hands out; grads_done() starts each unit's collective.
    void backward(int micro_step) {
        int C = cfg.channels, L = cfg.num_layers;
        acts.set_scratch_live(true);
        T* dres = acts.dresidual;
        T* dbtc = acts.dbtc;

        // LM head: logits = lnf @ wte^T; dlogits are in place of the logits
        EmbedTensors<T> gemb = embed_tensors(layout, zero.acquire_grads(layout.embed_unit(), micro_step));
        EmbedTensors<const T> head = embed_tensors(layout, head_params);
        matmul_backward(ctx, dbtc, gemb.wte, (T*)nullptr, acts.logits, acts.lnf, head.wte, BT(), C,
                        cfg.padded_vocab_size, (const T*)nullptr);
        zero.release_params(layout.embed_unit());

        // final layernorm
        int uf = layout.final_unit();
        FinalTensors<const T> fin = final_tensors(layout, zero.acquire_params(uf));
        FinalTensors<T> gfin = final_tensors(layout, zero.acquire_grads(uf, micro_step));
        float* lnf_mean = acts.lnf_stats;
        device_zero(dres, BT() * C * sizeof(T), ctx.stream);
        layernorm_backward(ctx, dres, gfin.lnfw, gfin.lnfb, dbtc, acts.layer(L - 1, BT()).residual3, fin.lnfw,
                           lnf_mean, lnf_mean + BT(), BT(), C);
        zero.release_params(uf);
        zero.grads_done(uf, micro_step);

        for (int l = L - 1; l >= 0; l--) {
            int u = layout.layer_unit(l);
            LayerTensors<const T> p = layer_tensors(layout, zero.acquire_params(u));
            LayerTensors<T> g = layer_tensors(layout, zero.acquire_grads(u, micro_step));
            if (acts.recompute == 2) {  // rebuild this block's activations from its input
                acts.load_layer_input(l, BT(), ctx.stream);
                layer_forward(l, p);
            }
            layer_backward(l, p, g);
            zero.release_params(u);
            zero.grads_done(u, micro_step);
        }

        // embeddings: needs no parameters, only the tokens
        encoder_backward(ctx, gemb.wte, gemb.wpe, dres, acts.inputs(), inputs_host, B, T_, C);
        zero.grads_done(layout.embed_unit(), micro_step);
        acts.set_saved_live(false);
        acts.set_scratch_live(false);
    }

    // Logits of position t of row 0 of the last forward, as fp32 on the host.
    std::vector<float> logits_at(int t) {
        std::vector<T> row(cfg.vocab_size);
        zero.copy_to_host(row.data(), acts.logits + (size_t)t * cfg.padded_vocab_size,
                          cfg.vocab_size * sizeof(T));
        std::vector<float> out(cfg.vocab_size);
        for (int v = 0; v < cfg.vocab_size; v++) out[v] = to_float(row[v]);
        return out;
    }
};

// ----------------------------------------------------------------------------
// Learning rate: linear warmup, then cosine decay to final_frac of the peak.
inline float learning_rate_at(const TrainOptions& o, int step, int total_steps) {
    if (step < o.warmup_steps) return o.learning_rate * (step + 1) / o.warmup_steps;
    float min_lr = o.learning_rate * o.final_lr_frac;
    int decay_steps = std::max(1, total_steps - o.warmup_steps);
    float ratio = std::min(1.0f, (float)(step - o.warmup_steps) / decay_steps);
    return min_lr + 0.5f * (1.0f + cosf((float)M_PI * ratio)) * (o.learning_rate - min_lr);
}

// The largest micro-batch (at most B) for which some validation shard holds one
// global batch of B*T*ranks+1 tokens; 0 if none does.
inline int validation_micro_batch(const std::string& pattern, int B, int T, int world) {
    size_t longest = 0;
    for (const std::string& path : glob_sorted(pattern)) longest = std::max(longest, read_shard_header(path));
    if (longest == 0) return B;  // no files: let the loader say so
    return (int)std::min<size_t>(B, (longest - 1) / ((size_t)T * world));
}

// Samples gen_tokens tokens from the model, starting from <|endoftext|>.
// Every rank runs it (stage 3 needs every rank for its gathers); rank 0 prints.
template <typename T>
void print_sample(GPT2<T>& model, const Tokenizer* tok, int gen_tokens, uint64_t seed, bool print) {
    int max_len = std::min<int>(gen_tokens + 1, std::min<int>(model.cfg.max_seq_len, (int)model.acts.maxBT));
    int eot = tok ? tok->eot_token : model.cfg.vocab_size - 1;
    std::vector<int> tokens(1, eot);
    Rng rng(seed);
    if (print) printf("sample: ");
    while ((int)tokens.size() < max_len) {
        int t = (int)tokens.size();
        model.forward(tokens.data(), nullptr, 1, t, 0.0f);
        std::vector<float> logits = model.logits_at(t - 1);
        float maxv = logits[0];
        for (float x : logits) maxv = std::max(maxv, x);
        double sum = 0.0;
        for (float& x : logits) sum += (x = expf(x - maxv));
        double coin = rng.next_float() * sum, acc = 0.0;
        int next = model.cfg.vocab_size - 1;
        for (int v = 0; v < model.cfg.vocab_size; v++)
            if ((acc += logits[v]) > coin) {
                next = v;
                break;
            }
        tokens.push_back(next);
        if (print) {
            if (tok) printf("%s", tok->decode(next).c_str());
            else printf("%d ", next);
            fflush(stdout);
        }
    }
    if (print) printf("\n");
}

inline size_t device_memory_used() {
#ifdef ZERO_CUDA
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
#else
    return 0;
#endif
}

// ----------------------------------------------------------------------------
// One rank's whole run.

template <typename T>
void train_rank(const TrainOptions& o, const RunSetup& run, Comm& comm) {
    const int rank = comm.rank, world = comm.world;
    const bool rank0 = rank == 0;
#ifdef _OPENMP
    omp_set_num_threads(std::max(1, omp_get_num_procs() / run.ranks_per_process));
#endif
    MemoryAccountant mem(rank);
    KernelCtx ctx = create_kernel_ctx(mem, (size_t)o.micro_batch * o.seq_len, run.cfg.channels, run.cfg.num_heads);
    ParamLayout layout(run.cfg);
    ZeroEngine<T> zero(layout, comm, mem, ctx, run.zero_config(o));
    GPT2<T> model(zero, o.micro_batch, o.seq_len, o.recompute, run.offload_activations, mem);
    MemoryPrediction predicted = predict_memory(run.memory_query(o), SHARD_ALIGN);

    if (run.model_file.empty()) zero.init_parameters(o.seed);
    else {
        ModelFile mf(run.model_file);
        zero.load_parameters([&](int u, float* dst) { mf.read_unit(layout, u, dst); });
    }

    DataLoader train_loader, val_loader;
    train_loader.init(o.train_pattern, o.micro_batch, o.seq_len, rank, world, o.shuffle != 0, o.seed);
    train_loader.set_vocab_check(run.cfg.vocab_size);
    // validation: the micro-batch, or fewer sequences if the validation set is smaller than one global batch
    int val_B = o.val_every > 0 && !o.val_pattern.empty() ? validation_micro_batch(o.val_pattern, o.micro_batch, o.seq_len, world) : 0;
    bool have_val = val_B > 0;
    if (have_val) {
        val_loader.init(o.val_pattern, val_B, o.seq_len, rank, world, false, o.seed);
        val_loader.set_vocab_check(run.cfg.vocab_size);
    }
    if (rank0 && o.val_every > 0 && val_B < o.micro_batch)
        printf(val_B ? "note: the validation set holds fewer than B*T*ranks tokens: validating with B=%d\n"
                     : "note: the validation set holds fewer than T*ranks+1 tokens: no validation\n", val_B);
    std::unique_ptr<Tokenizer> tokenizer;
    if (file_exists(o.tokenizer_path)) {
        tokenizer = std::make_unique<Tokenizer>();
        tokenizer->load(o.tokenizer_path);
    } else if (rank0 && o.sample_every > 0) {
        printf("note: no tokenizer at %s; samples print as token ids\n", o.tokenizer_path.c_str());
    }

    LossScaler scaler(loss_scaler_config(o), run.dtype == DType::F16);
    const OptimizerConfig oc = optimizer_config(o);

    const long tokens_per_step = (long)o.micro_batch * o.seq_len * world * run.micro_steps;
    int total_steps = o.max_steps > 0 ? o.max_steps : (int)(train_loader.num_batches() / run.micro_steps);
    CHECK(total_steps > 0, "the training data holds fewer than one step of %ld tokens", tokens_per_step);

    // resume
    int start_step = 0;
    if (o.resume) {
        RunState rs;
        std::string dir = resume_checkpoint(o.output_dir, zero, rs);
        if (dir.empty()) {
            if (rank0) printf("no complete checkpoint in %s: starting from scratch\n", o.output_dir.c_str());
        } else {
            scaler.st = rs.scaler;
            train_loader.restore(rs.loader);
            start_step = rs.step;
            if (rank0) printf("resumed from %s (step %d)\n", dir.c_str(), rs.step);
        }
    }

    // logging
    FILE* main_log = nullptr;
    if (rank0 && !o.output_dir.empty()) {
        make_dir(o.output_dir);
        main_log = open_file(o.output_dir + "/main.log", start_step > 0 ? "a" : "w");
    }
    auto save = [&](int step) {
        RunState rs{step, zero.adam_t, scaler.st, train_loader.state()};
        std::string dir = save_checkpoint(o.output_dir, rs, zero, run.dtype);
        if (rank0) printf("checkpoint written: %s\n", dir.c_str());
    };

    auto evaluate = [&]() {
        val_loader.reset();
        int batches = std::min<int>(o.val_max_batches, (int)val_loader.num_batches());
        double sum = 0.0;
        for (int i = 0; i < batches; i++) {
            val_loader.next_batch();
            model.forward(val_loader.inputs, val_loader.targets, val_B, o.seq_len, 0.0f);
            sum += model.read_loss_sum(false);
        }
        double tokens = (double)batches * val_B * o.seq_len * world;
        return comm.sum_scalar(sum) / tokens;
    };

    // MFU: model flops per second over the measured matmul peak of the devices in use
    // (emulated ranks share one device; NCCL ranks have one each)
    double peak = 0.0;
    comm.barrier();  // nobody computes while rank 0 measures
    if (rank0) {
#ifdef ZERO_CUDA
        peak = measure_matmul_peak_flops<T>(ctx, 8192);
#else
        // every core of the process: the other ranks wait at the barrier
        omp_set_num_threads(omp_get_num_procs());
        peak = measure_matmul_peak_flops<T>(ctx, 1024);
        omp_set_num_threads(std::max(1, omp_get_num_procs() / run.ranks_per_process));
#endif
        peak *= run.launch.world > 1 ? world : 1;
        printf("measured matmul peak: %.1f TFLOP/s (%s); model: %.1f GFLOP per token\n", peak / 1e12,
               dtype_name(run.dtype), train_flops_per_token(layout.num_parameters(), run.cfg, o.seq_len) / 1e9);
    }
    comm.barrier();
    const double flops_per_step = train_flops_per_token(layout.num_parameters(), run.cfg, o.seq_len) * tokens_per_step;
    if (rank0) {
        printf("training %d steps from step %d: %ld tokens per step (%d rank(s) x B=%d x T=%d x %d micro-step(s))\n",
               total_steps, start_step, tokens_per_step, world, o.micro_batch, o.seq_len, run.micro_steps);
    }
    double total_ms = 0.0;
    int timed_steps = 0;
    for (int step = start_step; step <= total_steps; step++) {
        bool last = step == total_steps;
        if (have_val && (step % o.val_every == 0 || last)) {
            double val_loss = evaluate();
            if (rank0) {
                printf("step %d: val loss %.6f\n", step, val_loss);
                if (main_log) fprintf(main_log, "s:%d tel:%.6f\n", step, val_loss), fflush(main_log);
            }
        }
        if (o.sample_every > 0 && (step % o.sample_every == 0 || last) && step > 0)
            print_sample(model, tokenizer.get(), o.gen_tokens, o.seed + step, rank0);
        if (!o.output_dir.empty() && step > start_step &&
            (last || (o.checkpoint_every > 0 && step % o.checkpoint_every == 0)))
            save(step);
        if (last) break;

        // ---- one optimizer step
        auto t0 = std::chrono::steady_clock::now();
        mem.reset_peak();
        comm.stats = CommStats{};
        MemCounts live_fwd, live_bwd;
        float dloss = scaler.scale() / (float)tokens_per_step;  // d(mean loss)/d(token loss), scaled

        for (int micro = 0; micro < run.micro_steps; micro++) {
            train_loader.next_batch();
            model.forward(train_loader.inputs, train_loader.targets, o.micro_batch, o.seq_len, dloss);
            model.add_losses(micro == 0);
            live_fwd = mem.live_bytes();
            model.backward(micro);
            live_bwd = mem.live_bytes();
        }
        float lr = learning_rate_at(o, step, total_steps);
        StepResult res = zero.step(lr, oc, scaler.scale());
        stream_sync(ctx.stream);
        MemCounts live_step = mem.live_bytes();
        float loss_scale_used = scaler.scale();
        scaler.update(res.skipped);
        double loss = comm.sum_scalar(model.read_loss_sum(true)) / tokens_per_step;
        auto t1 = std::chrono::steady_clock::now();
        double ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
        if (step > start_step) total_ms += ms, timed_steps++;  // the first step warms up

        if (rank0) {
            printf("step %4d/%d | loss %.6f | norm %.4f | lr %.2e | %.2f ms | %.0f tok/s", step + 1, total_steps, loss,
                   res.grad_norm, lr, ms, tokens_per_step / (ms / 1000.0));
            if (run.dtype == DType::F16) printf(" | scale %.17g%s", loss_scale_used, res.skipped ? " (skipped)" : "");
            if (peak > 0) printf(" | MFU %.1f%%", 100.0 * flops_per_step / (ms / 1000.0) / peak);
            printf(" | mem %.1f MiB\n", mem.peak_live(Arena::Device) / 1048576.0);
            if (main_log) fprintf(main_log, "s:%d trl:%.6f\n", step + 1, loss), fflush(main_log);
        }
        if (o.mem_report) {
            PhaseMemory phases{live_fwd, live_bwd, live_step};
            size_t used = device_memory_used();
            for (int r = 0; r < world; r++) {  // one rank at a time, in rank order
                comm.barrier();
                if (r != rank) continue;
                print_memory_line(rank, phases, predicted, mem, comm.stats, used);
                if (o.output_dir.empty()) continue;
                std::string suffix = "_rank" + std::to_string(rank) + ".csv";
                append_memory_csv(o.output_dir + "/mem_report" + suffix, step + 1, rank, phases, predicted, mem, used);
                append_comm_csv(o.output_dir + "/comm_report" + suffix, step + 1, rank, comm.stats);
            }
            comm.barrier();
        }
    }
    if (rank0 && timed_steps > 0)
        printf("average step time %.2f ms (%.0f tok/s) over %d steps; 20 steps take %.2f s\n", total_ms / timed_steps,
               tokens_per_step / (total_ms / timed_steps / 1000.0), timed_steps, 20 * total_ms / timed_steps / 1000.0);
    if (main_log) fclose(main_log);
    destroy_kernel_ctx(ctx);
}

// ----------------------------------------------------------------------------

template <typename T>
void run_world(const TrainOptions& o, const RunSetup& run) {
#ifdef ZERO_CUDA
    if (run.launch.world > 1) {  // one rank per process and GPU, under mpirun/srun/torchrun
        run_nccl_rank(run.launch, [&](Comm& comm) { train_rank<T>(o, run, comm); });
        return;
    }
#endif
    run_emulated_ranks(o.ranks, [&](int rank, EmulatedWorld& world) {
        KernelCtx comm_ctx;
        EmulatedComm comm(world, rank, comm_ctx);
        train_rank<T>(o, run, comm);
    });
}

#ifndef ZERO_NO_MAIN
int main(int argc, char** argv) {
    TrainOptions o;
    if (!parse_flags(argc, argv, o)) {
        print_usage(argv[0]);
        return 0;
    }
    RunSetup run = make_run_setup(o);
#ifdef ZERO_CUDA
    // Under a launcher, bind this rank's GPU before anything touches CUDA: the fit
    // check's cudaMemGetInfo would otherwise open a context on GPU 0 in every rank
    // and measure GPU 0's free memory.
    if (run.launch.world > 1) cudaCheck(cudaSetDevice(select_rank_device(run.launch)));
#endif
    if (o.estimate) {  // the prediction, and whether it fits this machine (exit status 1 if not)
        print_memory_prediction(run.memory_query(o), predict_memory(run.memory_query(o), SHARD_ALIGN), stdout);
        refuse_if_too_big(o, run);
        printf("fits: yes\n");
        return 0;
    }
    if (!o.consolidate.empty()) {
        consolidate_checkpoint(o.consolidate);
        return 0;
    }
    refuse_if_too_big(o, run);
    switch (run.dtype) {
        case DType::F32: run_world<float>(o, run); break;
        case DType::BF16: run_world<bf16>(o, run); break;
        case DType::F16: run_world<f16>(o, run); break;
    }
    return 0;
}
#endif
