// Text from the model: print_sample, the samples a training run prints as it
// goes; and --sample MODEL: text from a trained model. MODEL is an llm.c model file, a
// checkpoint folder (its model.bin) or a Hugging Face folder (config.json +
// model.safetensors). The prompt is --prompt's text, or else standard input
// when that is not a terminal; an empty prompt starts from <|endoftext|>.
// Tokens are drawn one at a time (temperature, top-k, --seed: the same seed
// gives the same text) and printed as they come; stdout carries only the text,
// the notes go to stderr.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "data/bpe.h"
#include "data/tokenizer.h"
#include "zero/base/common.h"
#include "zero/base/rng.h"
#include "zero/comm/comm_emulated.h"
#include "zero/model/gpt2.h"
#include "zero/pipeline/stage_runner.h"
#include "zero/run/model_source.h"
#include "zero/run/options.h"

// One token drawn from `logits` (V): temperature 0 (or top_k 1) takes the most
// likely token (the lowest id on a tie); otherwise the k most likely (all if
// top_k <= 0) are weighted by softmax(logits / temperature).
inline int sample_token(const std::vector<float>& logits, float temperature, int top_k, Rng& rng) {
    const int V = (int)logits.size();
    std::vector<int> order(V);
    for (int v = 0; v < V; ++v) order[v] = v;
    const int k = top_k > 0 && top_k < V ? top_k : V;
    auto more_likely = [&](int a, int b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
    std::partial_sort(order.begin(), order.begin() + k, order.end(), more_likely);
    if (temperature <= 0.0f || k == 1) return order[0];
    std::vector<double> weight(k);
    double sum = 0.0;
    for (int i = 0; i < k; ++i) sum += weight[i] = exp(((double)logits[order[i]] - logits[order[0]]) / temperature);
    const double coin = rng.next_float() * sum;
    double acc = 0.0;
    for (int i = 0; i < k; ++i)
        if ((acc += weight[i]) > coin) return order[i];
    return order[k - 1];
}

// Samples gen_tokens tokens from the model, starting from <|endoftext|>.
// Every rank runs it (stage 3 needs every rank for its gathers); rank 0 prints.
// Through a pipeline, each token's forward runs stage by stage and the last
// stage draws the token, which the pipeline group then shares.
template <typename T>
void print_sample(GPT2<T>& model, const Tokenizer* tok, int gen_tokens, uint64_t seed, bool print,
                  PipelineStage<T>* pipeline = nullptr) {
    // sequence parallelism cuts a pass's tokens evenly across the tensor group: the
    // prompt is padded to a multiple of t (causal attention keeps the padding out
    // of the logits read), and the longest padded prompt must fit
    const int multiple = model.sp ? model.tp : 1;
    const int room = std::min<int>(model.cfg.max_seq_len, (int)model.acts.maxBT) / multiple * multiple;
    const int max_len = std::min(gen_tokens + 1, room);
    int eot = tok ? tok->eot_token : model.cfg.vocab_size - 1;
    std::vector<int> tokens(1, eot);
    Rng rng(seed);
    if (print) printf("sample: ");
    while ((int)tokens.size() < max_len) {
        int t = (int)tokens.size();
        std::vector<int> padded = tokens;
        padded.resize((t + multiple - 1) / multiple * multiple, eot);
        if (pipeline) pipeline->forward_only(padded.data(), nullptr, 1, (int)padded.size());
        else model.forward(padded.data(), nullptr, 1, (int)padded.size(), 0.0f);
        int next = model.cfg.vocab_size - 1;
        if (model.last) {
            std::vector<float> logits = model.logits_at(t - 1);
            const float maxv = *std::max_element(logits.begin(), logits.end());
            double sum = 0.0;
            for (float& x : logits) sum += (x = expf(x - maxv));
            double coin = rng.next_float() * sum, acc = 0.0;
            for (int v = 0; v < model.cfg.vocab_size; v++)
                if ((acc += logits[v]) > coin) {
                    next = v;
                    break;
                }
        }
        if (pipeline) next = (int)pipeline->pipe.sum_scalar(model.last ? next : 0);
        tokens.push_back(next);
        if (print) {
            if (tok) printf("%s", tok->decode(next).c_str());
            else printf("%d ", next);
            fflush(stdout);
        }
    }
    if (print) printf("\n");
}

// The whole of standard input, unless it is a terminal (then nothing).
inline std::string read_stdin_prompt() {
    if (isatty(0)) return "";
    return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

template <typename T>
void run_sample(const TrainOptions& o) {
    CHECK(o.gen_tokens >= 1, "-g (tokens to generate) must be at least 1 (got %d)", o.gen_tokens);
    CHECK(o.temperature >= 0.0f, "--temperature must be >= 0 (got %g)", o.temperature);
    CHECK(file_exists(o.tokenizer_path), "--sample needs the tokenizer %s (make data writes it; or --tokenizer FILE)",
          o.tokenizer_path.c_str());
    ModelSource source = open_model_source(o.sample, "--sample");
    const GPT2Config& cfg = source.cfg;
    Tokenizer tok;
    tok.load(o.tokenizer_path);
    CHECK(tok.vocab_size <= cfg.vocab_size, "%s has %d tokens but the model only %d", o.tokenizer_path.c_str(),
          tok.vocab_size, cfg.vocab_size);
    Bpe bpe;
    bpe.load_tokens(tok.tokens(), tok.eot_token, o.tokenizer_path);

    const std::string prompt = o.prompt.empty() ? read_stdin_prompt() : o.prompt;
    std::vector<int> tokens = prompt.empty() ? std::vector<int>{tok.eot_token} : bpe.encode(prompt);
    CHECK((int)tokens.size() < cfg.max_seq_len,
          "the prompt is %zu tokens; the model's context is %d, so it must be at most %d to leave room for one more",
          tokens.size(), cfg.max_seq_len, cfg.max_seq_len - 1);
    const int room = cfg.max_seq_len - (int)tokens.size();
    const int n_new = std::min(o.gen_tokens, room);
    if (n_new < o.gen_tokens)
        fprintf(stderr, "note: the context of %d tokens leaves room for %d of the %d tokens asked for\n",
                cfg.max_seq_len, n_new, o.gen_tokens);
    fprintf(stderr, "sampling from %s (%s, %s): %zu prompt tokens, temperature %g, top-k %d, seed %llu\n",
            source.description.c_str(), describe_config(cfg).c_str(), dtype_name(dtype_of<T>::value), tokens.size(),
            o.temperature, o.top_k, o.seed);

    const HostClock clock;
    run_emulated_ranks(1, [&](int rank, EmulatedWorld& world) {
        KernelCtx comm_ctx;
        EmulatedComm comm(world, rank, comm_ctx);
        MemoryAccountant mem(rank);
        const int maxT = (int)tokens.size() + n_new;
        KernelCtx ctx = create_kernel_ctx(mem, (size_t)maxT, cfg.channels, cfg.num_heads);
        ParamLayout layout(cfg);
        ZeroEngine<T> zero(layout, comm, mem, ctx, {.stage = 0});
        GPT2<T> model(zero, 1, maxT, 0, false, mem);
        zero.load_parameters([&](int u, float* dst) { source.read_unit(layout, u, dst); });
        Rng rng(o.seed);
        if (!prompt.empty()) fwrite(prompt.data(), 1, prompt.size(), stdout);
        for (int i = 0; i < n_new; ++i) {
            const int t = (int)tokens.size();
            model.forward(tokens.data(), nullptr, 1, t, 0.0f);
            const int next = sample_token(model.logits_at(t - 1), o.temperature, o.top_k, rng);
            tokens.push_back(next);
            const std::string& text = tok.decode(next);
            fwrite(text.data(), 1, text.size(), stdout);
            fflush(stdout);
        }
        printf("\n");
        destroy_kernel_ctx(ctx);
    });
    const double s = clock.seconds();
    fprintf(stderr, "sampled %d tokens in %.2f s (%.1f tokens/s)\n", n_new, s, n_new / s);
}
