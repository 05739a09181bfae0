// --sample (zero/run/sample.h):
//   the draw     temperature 0 and top-k 1 take the most likely token; top-k draws only
//                among the k most likely; frequencies follow softmax(logits / temperature)
//   the command  greedy text equal to PyTorch's greedy decoding (dev/sample_reference.py);
//                the same seed gives the same text, another seed other text; --prompt and
//                standard input alike; a model file, its checkpoint folder and its Hugging
//                Face export alike; a prompt longer than the context refused with one line
//
// usage: test_sample <train_gpt2_zero_cpu> <dev/sample_reference.py> <gpt2_tokenizer.bin>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "test/trainer_run.h"
#include "zero/run/sample.h"

namespace {

void test_draw() {
    const std::vector<float> logits = {0.5f, 3.0f, -1.0f, 3.0f, 2.0f, 1.0f};
    Rng rng(7);
    EXPECT_EQ(sample_token(logits, 0.0f, 0, rng), 1);  // the lowest id of the two maxima
    EXPECT_EQ(sample_token(logits, 1.0f, 1, rng), 1);
    EXPECT_EQ(sample_token(logits, 5.0f, 1, rng), 1);

    // frequencies against the softmax they should follow
    auto check = [&](float temperature, int top_k) {
        const int draws = 40000;
        std::vector<int> count(logits.size(), 0);
        Rng r(123);
        for (int i = 0; i < draws; ++i) count[sample_token(logits, temperature, top_k, r)]++;
        std::vector<int> order = {1, 3, 4, 5, 0, 2};  // most likely first (ties: lower id)
        const int k = top_k > 0 ? top_k : (int)logits.size();
        double sum = 0;
        for (int i = 0; i < k; ++i) sum += exp(logits[order[i]] / temperature);
        double worst = 0;
        for (int i = 0; i < (int)logits.size(); ++i) {
            const double want = i < k ? exp(logits[order[i]] / temperature) / sum : 0.0;
            const double got = (double)count[order[i]] / draws;
            worst = std::max(worst, std::fabs(got - want));
            if (i >= k) EXPECT(count[order[i]] == 0, "top-%d drew token %d, not among the %d most likely", k, order[i], k);
        }
        // a binomial's standard deviation here is at most 0.0025
        EXPECT(worst < 0.012, "temperature %g, top-k %d: frequencies off by %.4f", temperature, top_k, worst);
    };
    check(1.0f, 0);
    check(0.5f, 0);
    check(2.0f, 3);
    Rng a(99), b(99);
    bool same = true;
    for (int i = 0; i < 100; ++i) same &= sample_token(logits, 1.0f, 0, a) == sample_token(logits, 1.0f, 0, b);
    EXPECT(same, "the same seed draws the same tokens");
}

struct SampleRun {
    int status;
    std::string text;  // stdout
    std::string err;   // stderr
};

SampleRun sample(const std::string& trainer, const std::string& args, const std::string& stdin_text = "") {
    const std::string cmd = "(" + (stdin_text.empty() ? "" : "printf '%s' '" + stdin_text + "' | ") + trainer + " " +
                            args + " 2> sample_stderr.txt)";
    CommandResult r = run_command(cmd);  // its stderr (empty) joins stdout; the trainer's went to the file
    SampleRun s{r.status, r.output, read_file_bytes("sample_stderr.txt")};
    return s;
}

void test_command(const std::string& trainer, const std::string& script, const std::string& tokenizer_path) {
    const std::string dir = "sample";
    fresh_dir(dir);
    write_markov_shard(dir + "/train.bin", TINY_VOCAB, 20000, 9);
    // a small model with GPT-2's vocabulary, trained a little so its tokens are not uniform
    TrainerRun train(trainer);
    train.model = "L=2,H=4,C=64,V=50257,T=64";
    train.train = dir + "/train.bin", train.out = dir + "/run";
    train.micro_batch = 2, train.seq_len = 64, train.steps = 4;
    train.extra = "-l 1e-2";
    train.run();
    const std::string ckpt = checkpoint_dir(dir + "/run", 4), model = ckpt + "/model.bin";
    const std::string tok = " --tokenizer " + tokenizer_path;
    const std::string prompt = "It was the best of times";
    const int n = 12;

    // greedy against PyTorch
    SampleRun greedy = sample(trainer, "--sample " + model + tok + " --prompt '" + prompt + "' -g 12 --temperature 0");
    EXPECT(greedy.status == 0, "--sample failed: %s", greedy.err.c_str());
    EXPECT(greedy.err.find("sampled 12 tokens") != std::string::npos, "stderr: %s", greedy.err.c_str());
    Tokenizer tk;
    tk.load(tokenizer_path);
    Bpe bpe;
    bpe.load_tokens(tk.tokens(), tk.eot_token, tokenizer_path);
    const std::vector<int> prompt_ids = bpe.encode(prompt);
    if (run_command(reference_python() + " -c 'import torch'").status == 0) {
        FILE* f = open_file(dir + "/prompt.bin", "wb");
        int count = (int)prompt_ids.size();
        fwrite(&count, 4, 1, f);
        fwrite(prompt_ids.data(), 4, count, f);
        fclose(f);
        CommandResult ref = run_command(reference_python() + " " + script + " " + model + " " + dir + "/prompt.bin " +
                                        std::to_string(n) + " " + dir + "/greedy.bin");
        EXPECT(ref.status == 0, "sample_reference.py failed:\n%s", ref.output.c_str());
        std::vector<int> ids(n);
        f = open_file(dir + "/greedy.bin", "rb");
        read_exact(f, ids.data(), ids.size() * 4, dir + "/greedy.bin");
        fclose(f);
        std::string want = prompt;
        for (int id : ids) want += tk.decode(id);
        want += "\n";
        EXPECT(greedy.text == want, "greedy text differs from PyTorch's:\n ours:  %s\n torch: %s", greedy.text.c_str(),
               want.c_str());
    } else {
        printf("note: PyTorch is not installed: greedy decoding is not compared\n");
    }

    // seeds, prompt sources, model sources
    const std::string args = tok + " -g 12 --temperature 0.9 --top_k 50 --seed 5";
    SampleRun a = sample(trainer, "--sample " + model + args + " --prompt '" + prompt + "'");
    SampleRun b = sample(trainer, "--sample " + model + args + " --prompt '" + prompt + "'");
    SampleRun c = sample(trainer, "--sample " + model + args + " --seed 6 --prompt '" + prompt + "'");
    SampleRun from_stdin = sample(trainer, "--sample " + model + args, prompt);
    SampleRun from_ckpt = sample(trainer, "--sample " + ckpt + args + " --prompt '" + prompt + "'");
    CommandResult exp = run_command(trainer + " -e " + model + " --export_hf " + dir + "/hf");
    EXPECT(exp.status == 0, "--export_hf failed:\n%s", exp.output.c_str());
    SampleRun from_hf = sample(trainer, "--sample " + dir + "/hf" + args + " --prompt '" + prompt + "'");
    EXPECT(a.status == 0 && a.text.rfind(prompt, 0) == 0 && a.text.size() > prompt.size() + 1,
           "a sample starts with its prompt: %s", a.text.c_str());
    EXPECT(a.text == b.text, "the same seed gave different text:\n%s\n%s", a.text.c_str(), b.text.c_str());
    EXPECT(a.text != c.text, "seeds 5 and 6 gave the same text: %s", a.text.c_str());
    EXPECT(a.text == from_stdin.text, "a prompt on stdin gave other text:\n%s\n%s", a.text.c_str(),
           from_stdin.text.c_str());
    EXPECT(a.text == from_ckpt.text, "the checkpoint folder gave other text:\n%s\n%s", a.text.c_str(),
           from_ckpt.text.c_str());
    EXPECT(a.text == from_hf.text, "the Hugging Face export gave other text:\n%s\n%s", a.text.c_str(),
           from_hf.text.c_str());
    printf("sample: %s", a.text.c_str());

    // the context: 64 tokens
    std::string long_prompt;
    for (int i = 0; i < 70; ++i) long_prompt += " word";
    SampleRun too_long = sample(trainer, "--sample " + model + tok + " --prompt '" + long_prompt + "'");
    EXPECT(too_long.status == 1 && too_long.err.rfind("error: the prompt is 70 tokens", 0) == 0 &&
               std::count(too_long.err.begin(), too_long.err.end(), '\n') == 1,
           "a prompt longer than the context: status %d, stderr: %s", too_long.status, too_long.err.c_str());
    SampleRun capped = sample(trainer, "--sample " + model + tok + " -g 100 --prompt '" + prompt + "'");
    char want[64];
    snprintf(want, sizeof(want), "sampled %d tokens", 64 - (int)prompt_ids.size());
    EXPECT(capped.status == 0 && capped.err.find(want) != std::string::npos,
           "-g beyond the context: expected \"%s\" in: %s", want, capped.err.c_str());
}

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args =
        test_args(argc, argv, "<train_gpt2_zero_cpu> <dev/sample_reference.py> <gpt2_tokenizer.bin>");
    test_draw();
    if (!file_exists(args[2])) {
        printf("SKIP: %s not found (make data writes it)\n", args[2].c_str());
        return g_test_failures ? 1 : TEST_SKIP;
    }
    // one thread: these runs are tiny, and on a busy machine OpenMP's waiting costs more than it gains
    test_command("OMP_NUM_THREADS=1 " + args[0], args[1], args[2]);
    return test_summary("test_sample");
}
