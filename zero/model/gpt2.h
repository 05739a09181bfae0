// The model: GPT-2 forward and backward over the units of the flat buffer, as
// explicit call lists with the shapes in comments. Every parameter pointer
// comes from the ZeRO engine's hooks around each unit (zero/README.md, "The
// hooks"); train_step() in zero/run/train_step.h drives it.
//
// Tensor parallelism is explicit here: QKV and fc column-parallel, the two
// projections row-parallel (their partial sums all-reduced, the bias added by
// the group's rank 0), the embedding and LM head vocabulary-parallel
// (zero/model/vocab_parallel.h); with sp the residual stream holds B*T/t rows
// per rank from row0() (zero/README.md, "Two slicings"). A pipeline stage runs
// the same call lists over its own units, from acts.encoded to its last
// layer's output, in the activation slot selected ("Pipeline stages").
#pragma once

#include <cstring>
#include <vector>

#include "kernels/kernels.h"
#include "zero/base/backend.h"
#include "zero/base/memory.h"
#include "zero/engine/zero_engine.h"
#include "zero/layout/activations.h"
#include "zero/layout/param_layout.h"
#include "zero/model/vocab_parallel.h"

template <typename T>
struct GPT2 {
    const GPT2Config cfg;
    const ParamLayout& layout;
    ZeroEngine<T>& zero;
    KernelCtx ctx;
    Comm* const tensor;    // the tensor group (null without tensor parallelism)
    const int tp, tp_rank;  // its size and this rank's place in it
    const bool sp;          // sequence parallelism
    Activations<T> acts;
    const bool first, last, pipelined;  // the pipeline stage: embeddings here, the LM head here, several stages
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
        Event copied{};  // an event never recorded is complete: the first wait returns at once
    };
    TokenSlot token_slots[2];
    int next_token_slot = 0;

    // activation_slots: micro-batches whose activations a pipeline stage holds at once
    GPT2(ZeroEngine<T>& z, int max_B, int max_T, int recompute, bool offload_activations, MemoryAccountant& mem,
         bool sequence_parallel = false, int activation_slots = 1, bool partition_activations = true)
        : cfg(z.layout.cfg),
          layout(z.layout),
          zero(z),
          ctx(z.ctx),
          tensor(z.tensor),
          tp(z.layout.tp),
          tp_rank(z.tp_rank),
          sp(sequence_parallel),
          acts(cfg, max_B, max_T, recompute, offload_activations, mem, z.layout.tp, sequence_parallel, z.tp_rank,
               z.layout.stage, activation_slots, partition_activations),
          first(z.layout.stage.first),
          last(z.layout.stage.last),
          pipelined(z.layout.pipelined()) {
        CHECK(!sp || tensor, "internal: sequence parallelism needs a tensor group");
        for (TokenSlot& t : token_slots) {
            t.host = (int*)host_malloc(2 * acts.maxBT * sizeof(int));
            t.copied = event_create();
            check_track(t.host, 2 * acts.maxBT * sizeof(int), "a pinned token slot");
        }
    }
    ~GPT2() {
        for (TokenSlot& t : token_slots) {
            event_sync(t.copied);
            event_destroy(t.copied);
            check_untrack(t.host);
            host_free(t.host);
        }
    }
    GPT2(const GPT2&) = delete;
    GPT2& operator=(const GPT2&) = delete;

    // (B, T) inputs and targets up to the device, on the compute stream.
    void upload_tokens(const int* inputs, const int* targets) {
        TokenSlot& t = token_slots[next_token_slot];
        next_token_slot ^= 1;
        event_sync(t.copied);  // its previous batch has reached the device
        check_host("the token slot's copy", {writes(t.host, 2 * acts.maxBT)});
        memcpy(t.host, inputs, BT() * sizeof(int));
        device_copy(acts.inputs(), t.host, BT() * sizeof(int), ctx.stream);
        if (targets) {
            memcpy(t.host + acts.maxBT, targets, BT() * sizeof(int));
            device_copy(acts.targets(), t.host + acts.maxBT, BT() * sizeof(int), ctx.stream);
        }
        event_record(t.copied, ctx.stream);
    }

    size_t BT() const { return (size_t)B * T_; }

    // A row-parallel layer's bias, added by one rank of the group only.
    const T* row_parallel_bias(const T* b) const { return tp_rank == 0 ? b : nullptr; }

    // Rows of the residual stream this rank holds, and the first of them.
    size_t R() const { return acts.rows(BT()); }
    size_t row0() const { return sp ? (size_t)tp_rank * R() : 0; }
    // Pipeline boundaries, boundary_elems() = R x C each (this rank's rows under
    // sp): the stage's input (where the previous stage's output lands), its
    // output, the gradient of its input (sent back) and of its output (received,
    // into the backward scratch that backward() moves it from).
    void set_shape(int batch, int seq_len) { B = batch, T_ = seq_len; }
    size_t boundary_elems() const { return R() * cfg.channels; }
    T* stage_input() const { return acts.encoded; }
    T* stage_output() const { return acts.layer(acts.L - 1, BT()).residual3; }
    T* input_grad() const { return acts.dresidual + row0() * cfg.channels; }
    T* output_grad() const { return acts.dbtc + row0() * cfg.channels; }

    // After a row-parallel layer: the group's sum of `partial` (BT, C), all of
    // it (all-reduce) or, with sp, this rank's rows of it (reduce-scatter, in
    // place: at row0()).
    void tp_reduce(T* partial) {
        if (!tensor) return;
        if (sp) {
            size_t n = R() * cfg.channels;
            tensor->reduce_scatter_sum(partial, partial + row0() * cfg.channels, n, dtype_of<T>::value, ctx.stream);
        } else {
            tensor->all_reduce_sum(partial, BT() * cfg.channels, dtype_of<T>::value, ctx.stream);
        }
    }
    // Before a column-parallel layer: its input whole, (BT, C) `full`: every
    // rank's rows, from each rank's rows at their place (nothing to do without sp).
    void tp_gather(T* full) {
        const size_t mine = row0() * cfg.channels, n = R() * cfg.channels;
        if (sp) tensor->all_gather(full + mine, full, n, dtype_of<T>::value, ctx.stream);
    }
    // A layernorm's backward over this rank's rows. With sp its weight and bias
    // gradients are this rank's rows' share: summed over the group before they
    // join g's (which may hold earlier micro-steps' sums).
    void layernorm_backward_rows(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                                 const float* mean, const float* rstd) {
        int C = cfg.channels;
        if (!sp) return layernorm_backward(ctx, dinp, dweight, dbias, dout, inp, weight, mean, rstd, (int)R(), C);
        T* part = acts.ln_grads;  // (2, C)
        device_zero(part, 2 * C * sizeof(T), ctx.stream);
        layernorm_backward(ctx, dinp, part, part + C, dout, inp, weight, mean, rstd, (int)R(), C);
        tensor->all_reduce_sum(part, 2 * (size_t)C, dtype_of<T>::value, ctx.stream);
        accumulate(ctx, dweight, part, C, false);
        accumulate(ctx, dbias, part + C, C, false);
    }

    // One transformer block: x (B,T,C) -> residual3 (B,T,C). Cl = C/t channels
    // and NHl = NH/t heads are this rank's (all of them without tensor parallelism).
    // fused (ZERO_VARIANTS=residual_ln, in a forward pass, not a recomputation):
    // the block leaves its last residual add, residual2 + branch, to be fused
    // into the layernorm that reads its output next: the next block's ln1 (here,
    // for l > 0: x written as the last block's residual3 while it is normalised),
    // the final layernorm (head_forward), or none (a stage's last block not the
    // model's: forward() adds it alone). residual3 is written once either way.
    void layer_forward(int l, const LayerTensors<const T>& p, bool fused = false) {
        int C = cfg.channels, Cl = acts.Cl, NHl = acts.NHl;
        LayerActs<T> a = acts.layer(l, BT());
        T* x = acts.layer_input(l, BT());  // (R,C): this rank's rows (all BT without sp)
        T* branch = acts.branch;
        size_t mine = row0() * C;  // where this rank's rows sit in a whole (BT,C) buffer
        if (fused && l > 0)
            residual_layernorm_forward(ctx, x, a.ln1 + mine, a.ln1_mean, a.ln1_rstd, acts.layer(l - 1, BT()).residual2,
                                       branch + mine, p.ln1w, p.ln1b, (int)R(), C);
        else
            layernorm_forward(ctx, a.ln1 + mine, a.ln1_mean, a.ln1_rstd, x, p.ln1w, p.ln1b, (int)R(), C);
        tp_gather(a.ln1);                                                                      // (B,T,C)
        matmul_forward(ctx, a.qkv, a.ln1, p.qkvw, p.qkvb, BT(), C, 3 * Cl, (T*)nullptr);      // (B,T,3Cl)
        attention_forward(ctx, a.atty, a.att_lse, a.qkv, B, T_, Cl, NHl);                     // (B,T,Cl)
        matmul_forward(ctx, branch, a.atty, p.attprojw, row_parallel_bias(p.attprojb), BT(), Cl, C,
                       (T*)nullptr);                                                           // (B,T,C)
        tp_reduce(branch);
        residual_layernorm_forward(ctx, a.residual2, a.ln2 + mine, a.ln2_mean, a.ln2_rstd, x, branch + mine, p.ln2w,
                                   p.ln2b, (int)R(), C);
        tp_gather(a.ln2);
        matmul_forward(ctx, a.fch_gelu, a.ln2, p.fcw, p.fcb, BT(), C, 4 * Cl, a.fch);         // (B,T,4Cl), GELU fused
        matmul_forward(ctx, branch, a.fch_gelu, p.fcprojw, row_parallel_bias(p.fcprojb), BT(), 4 * Cl, C,
                       (T*)nullptr);                                                           // (B,T,C)
        tp_reduce(branch);
        if (!fused) residual_forward(ctx, a.residual3, a.residual2, branch + mine, R() * C);
    }

    // Backward of one block. acts.dresidual holds dL/d(residual3) on entry and
    // dL/d(x) on exit; g receives the block's parameter gradients (accumulated).
    void layer_backward(int l, const LayerTensors<const T>& p, const LayerTensors<T>& g) {
        int C = cfg.channels, Cl = acts.Cl, NHl = acts.NHl;
        LayerActs<T> a = acts.layer(l, BT());
        const T* x = acts.layer_input(l, BT());
        size_t mine = row0() * C;
        T* dres = acts.dresidual;  // (B,T,C); with sp this rank's rows are those at `mine`
        T* dbtc = acts.dbtc;
        if (acts.recompute == 1) gelu_forward(ctx, a.fch_gelu, a.fch, BT() * 4 * Cl);
        // residual3 = residual2 + fcproj(gelu(fc(ln2)))
        tp_gather(dres);  // the row-parallel layer's output gradient, every row
        matmul_backward(ctx, acts.dfch, g.fcprojw, g.fcprojb, dres, a.fch_gelu, p.fcprojw, BT(), 4 * Cl, C, a.fch);
        matmul_backward(ctx, dbtc, g.fcw, g.fcb, acts.dfch, a.ln2, p.fcw, BT(), C, 4 * Cl, (const T*)nullptr);
        tp_reduce(dbtc);  // d(ln2): every rank's hidden features contribute
        layernorm_backward_rows(dres + mine, g.ln2w, g.ln2b, dbtc + mine, a.residual2, p.ln2w, a.ln2_mean,
                                a.ln2_rstd);
        // residual2 = x + attproj(attention(qkv(ln1)))
        tp_gather(dres);
        matmul_backward(ctx, dbtc, g.attprojw, g.attprojb, dres, a.atty, p.attprojw, BT(), Cl, C, (const T*)nullptr);
        attention_backward(ctx, acts.dqkv, dbtc, a.qkv, a.atty, a.att_lse, B, T_, Cl, NHl);
        matmul_backward(ctx, dbtc, g.qkvw, g.qkvb, acts.dqkv, a.ln1, p.qkvw, BT(), C, 3 * Cl, (const T*)nullptr);
        tp_reduce(dbtc);  // d(ln1): every rank's heads contribute
        layernorm_backward_rows(dres + mine, g.ln1w, g.ln1b, dbtc + mine, x, p.ln1w, a.ln1_mean, a.ln1_rstd);
    }

    // Forward over a (B, T) batch of tokens on the host. With targets, the
    // per-token losses are computed (acts.losses); with dloss != 0 (training)
    // the loss gradient replaces the logits and (without a pipeline) unit 0
    // stays held for backward.
    // Nothing is read back: the host does not wait for the device here.
    void forward(const int* inputs, const int* targets, int batch, int seq_len, float dloss) {
        B = batch, T_ = seq_len, inputs_host = inputs;
        bool training = dloss != 0.0f;
        int L = acts.L, l0 = layout.stage.first_layer;
        CHECK(BT() <= acts.maxBT && T_ <= cfg.max_seq_len, "internal: batch larger than the activations");
        if (first || last) upload_tokens(inputs, targets);
        acts.set_saved_live(true);
        zero.begin_pass(true, training && !pipelined);
        if (first) embed_forward();
        // ZERO_VARIANTS=residual_ln: a block's output is written when the next
        // layernorm reads it, so it is kept for backward one block later
        const bool fused = variant_on(Variant::ResidualLn);
        auto keep_output = [&](int l) { if (training) acts.save_layer_output(l, BT(), ctx.stream); };
        for (int l = 0; l < L; l++) {
            int u = layout.layer_unit(l0 + l);
            at_unit(u);
            layer_forward(l, layer_tensors(layout, zero.acquire_params(u)), fused);
            if (!fused) keep_output(l);
            else if (l > 0) keep_output(l - 1);
            zero.release_params(u);
        }
        if (fused && !last) {  // the stage's output, sent on: no layernorm here to fuse its add into
            LayerActs<T> a = acts.layer(L - 1, BT());
            residual_forward(ctx, a.residual3, a.residual2, acts.branch + row0() * cfg.channels, R() * cfg.channels);
        }
        if (last) head_forward(targets, dloss, fused);
        if (fused) keep_output(L - 1);
        // an evaluation pass keeps its activations live: the caller reads its
        // losses or logits from them (the next training backward lets them go)
        if (!training) zero.end_pass();
    }

    // The first stage's start: token and position embeddings into acts.encoded.
    void embed_forward() {
        int C = cfg.channels;
        at_unit(layout.embed_unit());
        EmbedTensors<const T> emb = embed_tensors(layout, zero.acquire_params(layout.embed_unit()));
        if (sp) {  // each rank its looked-up rows, summed over the group into each rank's rows
            int Vl = vocab_local();
            encoder_forward_vocab(ctx, acts.branch, acts.inputs(), emb.wte, emb.wpe, B, T_, C, Vl * tp_rank, Vl,
                                  tp_rank == 0);  // (B,T,C) partial
            tensor->reduce_scatter_sum(acts.branch, acts.encoded, R() * C, dtype_of<T>::value, ctx.stream);
        } else if (tensor)
            vocab_parallel_embedding(ctx, *tensor, acts.encoded, acts.inputs(), emb.wte, emb.wpe, B, T_, C,
                                     cfg.padded_vocab_size);  // (B,T,C)
        else
            encoder_forward(ctx, acts.encoded, acts.inputs(), emb.wte, emb.wpe, B, T_, C, cfg.padded_vocab_size);  // (B,T,C)
        zero.release_params(layout.embed_unit());
    }

    // The last stage's end: final layernorm, LM head, loss (and its gradient in
    // place of the logits when training). Without a pipeline, unit 0 stays held
    // for the head's backward. fused: the last block's residual add is fused
    // into the final layernorm (layer_forward).
    void head_forward(const int* targets, float dloss, bool fused = false) {
        int C = cfg.channels, L = acts.L;
        float* lnf_mean = acts.lnf_stats;
        at_unit(layout.final_unit());
        FinalTensors<const T> fin = final_tensors(layout, zero.acquire_params(layout.final_unit()));
        LayerActs<T> a = acts.layer(L - 1, BT());
        if (fused)
            residual_layernorm_forward(ctx, a.residual3, acts.lnf + row0() * C, lnf_mean, lnf_mean + R(), a.residual2,
                                       acts.branch + row0() * C, fin.lnfw, fin.lnfb, (int)R(), C);
        else
            layernorm_forward(ctx, acts.lnf + row0() * C, lnf_mean, lnf_mean + R(), a.residual3, fin.lnfw, fin.lnfb,
                              (int)R(), C);
        zero.release_params(layout.final_unit());
        tp_gather(acts.lnf);  // (B,T,C)

        // the LM head shares wte with the embeddings: unit 0 is gathered again
        at_unit(layout.embed_unit());
        head_params = zero.acquire_params(layout.embed_unit());
        EmbedTensors<const T> head = embed_tensors(layout, head_params);
        matmul_forward(ctx, acts.logits, acts.lnf, head.wte, (const T*)nullptr, BT(), C, vocab_local(),
                       (T*)nullptr);  // (B,T,Vp/t)
        if (targets && tensor)
            vocab_parallel_cross_entropy(ctx, *tensor, acts.logits, (float*)acts.losses, acts.targets(), (int)BT(),
                                         cfg.vocab_size, cfg.padded_vocab_size, dloss, acts.vocab_stats);
        else if (targets)
            fused_classifier(ctx, acts.logits, (float*)acts.losses, acts.targets(), BT(), cfg.vocab_size,
                             cfg.padded_vocab_size, dloss);
        if (dloss == 0.0f || pipelined) zero.release_params(layout.embed_unit());
    }

    // The per-token losses of the last forward, added into acts.loss_sums (the
    // running sum of a step's micro-steps), on the device.
    void add_losses(bool first_micro_step) {
        if (first_micro_step) acts.mem.set_live(acts.loss_sums, true);
        add_loss_sums(ctx, acts.loss_sums, (const float*)acts.losses, BT(), first_micro_step);
    }
    // The sum of acts.loss_sums (the step's, which it then lets go), or of the
    // last forward's losses, read back. ZERO_VARIANTS=device_loss: the step's
    // sum on the device, in a fixed tree of doubles, into loss_sums' first 8
    // bytes (consumed), and 8 bytes read back instead of B*T floats.
    double read_loss_sum(bool accumulated) {
        if (accumulated && BT() >= 2 && variant_on(Variant::DeviceLoss)) {
            double sum = 0.0;
            loss_total(ctx, (double*)acts.loss_sums, acts.loss_sums, BT());
            zero.copy_to_host(&sum, acts.loss_sums, sizeof(double));
            acts.mem.set_live(acts.loss_sums, false);
            return sum;
        }
        std::vector<float> losses(BT());
        zero.copy_to_host(losses.data(), accumulated ? acts.loss_sums : acts.losses, BT() * sizeof(float));
        if (accumulated) acts.mem.set_live(acts.loss_sums, false);
        double sum = 0.0;
        for (float x : losses) sum += x;
        return sum;
    }

    // Backward of the selected slot's training forward (`inputs`: its tokens on
    // the host, when not the last forward's). Gradients accumulate into the
    // buffers the engine hands out; grads_done() starts each unit's collective.
    // A stage other than the last starts from the gradient of its output in
    // output_grad().
    void backward(int micro_step, const int* inputs = nullptr) {
        int C = cfg.channels, L = acts.L, l0 = layout.stage.first_layer;
        if (inputs) inputs_host = inputs;
        acts.set_scratch_live(true);
        T* dres = acts.dresidual;
        if (pipelined) zero.begin_pass(false, true);
        if (last) head_backward(micro_step);
        else device_copy(dres + row0() * C, output_grad(), boundary_elems() * sizeof(T), ctx.stream);

        for (int l = L - 1; l >= 0; l--) {
            int u = layout.layer_unit(l0 + l);
            at_unit(u);
            LayerTensors<const T> p = layer_tensors(layout, zero.acquire_params(u));
            LayerTensors<T> g = layer_tensors(layout, zero.acquire_grads(u, micro_step));
            if (acts.recompute == 2) {  // rebuild this block's activations from its input
                acts.load_layer_input(l, BT(), ctx.stream);
                if (acts.partitioned && l > 0) {  // Pa: the input from the group's rows
                    T* input = acts.layer_input(l, BT());
                    size_t n = acts.saved_rows(BT()) * C;
                    tensor->all_gather(input + acts.saved_row0(BT()) * C, input, n, dtype_of<T>::value, ctx.stream);
                }
                layer_forward(l, p);
            }
            layer_backward(l, p, g);
            zero.release_params(u);
            zero.grads_done(u, micro_step);
        }

        // embeddings: needs no parameters, only the tokens
        if (first) {
            at_unit(layout.embed_unit());
            EmbedTensors<T> gemb = embed_tensors(layout, zero.acquire_grads(layout.embed_unit(), micro_step));
            tp_gather(dres);  // every row: a rank's vocabulary rows may be any position's token
            if (tensor)
                encoder_backward_vocab(ctx, gemb.wte, gemb.wpe, dres, inputs_host, B, T_, C,
                                       layout.vocab_begin(tp_rank), vocab_local());
            else
                encoder_backward(ctx, gemb.wte, gemb.wpe, dres, acts.inputs(), inputs_host, B, T_, C,
                                 cfg.padded_vocab_size);
            zero.grads_done(layout.embed_unit(), micro_step);
        }
        acts.set_saved_live(false);
        // a later pipeline stage still has to send its input's gradient, which
        // is in the scratch: PipelineStage::exchange lets it go once sent
        if (!pipelined || first) acts.set_scratch_live(false);
    }

    // The last stage's start of backward: the LM head (its wte gradient where the
    // engine keeps the head's) and the final layernorm, into acts.dresidual.
    void head_backward(int micro_step) {
        int C = cfg.channels, L = acts.L;
        T* dres = acts.dresidual;
        T* dbtc = acts.dbtc;
        // LM head: logits = lnf @ wte^T; dlogits are in place of the logits
        at_unit(layout.embed_unit());
        if (pipelined) head_params = zero.acquire_params(layout.embed_unit());
        T* dwte = zero.acquire_head_grads(micro_step);
        EmbedTensors<const T> head = embed_tensors(layout, head_params);
        matmul_backward(ctx, dbtc, dwte, (T*)nullptr, acts.logits, acts.lnf, head.wte, BT(), C, vocab_local(),
                        (const T*)nullptr);
        tp_reduce(dbtc);  // d(lnf): every rank's vocabulary columns contribute
        zero.release_params(layout.embed_unit());

        // final layernorm
        int uf = layout.final_unit();
        at_unit(uf);
        FinalTensors<const T> fin = final_tensors(layout, zero.acquire_params(uf));
        FinalTensors<T> gfin = final_tensors(layout, zero.acquire_grads(uf, micro_step));
        float* lnf_mean = acts.lnf_stats;
        device_zero(dres, BT() * C * sizeof(T), ctx.stream);
        layernorm_backward_rows(dres + row0() * C, gfin.lnfw, gfin.lnfb, dbtc + row0() * C,
                                acts.layer(L - 1, BT()).residual3, fin.lnfw, lnf_mean, lnf_mean + R());
        zero.release_params(uf);
        zero.grads_done(uf, micro_step);
    }

    // padded-vocabulary columns of the logits this rank computes
    int vocab_local() const { return cfg.padded_vocab_size / tp; }

    // Logits of position t of row 0 of the last forward, as fp32 on the host
    // (with tensor parallelism every rank of the group calls it). Collectives
    // move device memory only, and no device buffer holds a whole row, so the
    // row's columns travel one rank's slice at a time through the slice's
    // place in the logits: rank k puts its own slice there and broadcasts it
    // (the others receive it over theirs and read it back); in the end every
    // rank puts its own slice back.
    std::vector<float> logits_at(int t) {
        std::vector<T> row(cfg.padded_vocab_size);
        if (tensor) {
            const size_t n = vocab_local(), bytes = n * sizeof(T);
            T* slice = acts.logits + (size_t)t * n;  // (Vp/t) on the device
            T* mine = row.data() + (size_t)tp_rank * n;
            zero.copy_to_host(mine, slice, bytes);
            for (int k = 0; k < tp; k++) {
                if (k == tp_rank) zero.copy_to_device(slice, mine, bytes);
                tensor->broadcast(slice, bytes, k, ctx.stream);
                if (k != tp_rank) zero.copy_to_host(row.data() + (size_t)k * n, slice, bytes);
            }
            zero.copy_to_device(slice, mine, bytes);
        } else {
            zero.copy_to_host(row.data(), acts.logits + (size_t)t * cfg.padded_vocab_size,
                              cfg.vocab_size * sizeof(T));
        }
        std::vector<float> out(cfg.vocab_size);
        for (int v = 0; v < cfg.vocab_size; v++) out[v] = to_float(row[v]);
        return out;
    }
};
