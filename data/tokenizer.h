// llm.c's token decoding file, gpt2_tokenizer.bin: reading it (the trainer
// prints sampled text with it) and writing it (prepare_data makes it from the
// BPE vocabulary).
//
// Format (little-endian):
//   header: 256 x uint32
//     [0] = 20240328 (magic)
//     [1] = version: 2 (also accepted: 1, llm.c's older files, whose EOT is 50256)
//     [2] = vocab_size
//     [3] = EOT token id (version 2 only)
//   then for each token id 0..vocab_size-1: one uint8 length L, then L raw bytes
//   (the token's bytes with GPT-2's byte-unicode mapping undone, so a token may be
//   a fragment of a UTF-8 character).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/bpe.h"
#include "zero/base/common.h"

constexpr uint32_t kTokenizerMagic = 20240328;
constexpr uint32_t kTokenizerVersion = 2;
constexpr int kTokenizerHeaderWords = 256;

struct Tokenizer {
    int vocab_size = 0;
    int eot_token = -1;

    // Loads gpt2_tokenizer.bin; any problem is a one-line fatal error naming the file.
    void load(const std::string& path) {
        FILE* f = open_file(path, "rb");
        const size_t size = file_size(f);
        CHECK(size >= sizeof(uint32_t) * kTokenizerHeaderWords,
              "%s: truncated: %zu bytes, smaller than the %zu-byte header", path.c_str(), size,
              sizeof(uint32_t) * kTokenizerHeaderWords);
        uint32_t header[kTokenizerHeaderWords];
        read_exact(f, header, sizeof(header), path);
        CHECK(header[0] == kTokenizerMagic, "%s: wrong magic %u (expected %u): not a gpt2_tokenizer.bin file",
              path.c_str(), header[0], kTokenizerMagic);
        CHECK(header[1] == 1 || header[1] == 2, "%s: unsupported version %u (expected 1 or 2)", path.c_str(),
              header[1]);
        CHECK(header[2] > 0 && header[2] <= (1u << 24), "%s: implausible vocab_size %u", path.c_str(), header[2]);
        vocab_size = (int)header[2];
        eot_token = header[1] == 1 ? 50256 : (int)header[3];  // version 1 had no EOT field; GPT-2's is 50256
        CHECK(eot_token >= 0 && eot_token < vocab_size, "%s: EOT token %d is outside the vocabulary of %d",
              path.c_str(), eot_token, vocab_size);

        tokens_.assign(vocab_size, std::string());
        for (int id = 0; id < vocab_size; ++id) {
            uint8_t len;
            CHECK(fread(&len, 1, 1, f) == 1, "%s: truncated: header says %d tokens but the file ends at token %d",
                  path.c_str(), vocab_size, id);
            tokens_[id].resize(len);
            CHECK(fread(tokens_[id].data(), 1, len, f) == len,
                  "%s: truncated: header says %d tokens but the file ends inside token %d", path.c_str(), vocab_size,
                  id);
        }
        const long end = ftell(f);
        fclose(f);
        CHECK((size_t)end == size, "%s: %zu unexpected bytes after the last of the %d tokens", path.c_str(),
              size - (size_t)end, vocab_size);
    }


    // The raw bytes of token `id`. Ids outside [0, vocab_size) -- e.g. the padding
    // rows of a padded embedding table -- decode to the empty string, so printing a
    // sample never crashes; use valid() to tell them apart.
    const std::string& decode(int id) const { return valid(id) ? tokens_[id] : empty_; }
    bool valid(int id) const { return id >= 0 && id < vocab_size; }
    const std::vector<std::string>& tokens() const { return tokens_; }

   private:
    std::vector<std::string> tokens_;
    std::string empty_;
};

// Writes gpt2_tokenizer.bin (version 2) for the vocabulary of `bpe`, atomically.
inline void write_tokenizer_bin(const std::string& path, const Bpe& bpe) {
    CHECK(bpe.vocab_size() > 0, "write_tokenizer_bin: the BPE vocabulary is not loaded");
    CHECK(bpe.eot_token() >= 0, "write_tokenizer_bin: the vocabulary has no <|endoftext|> token");
    uint32_t header[kTokenizerHeaderWords] = {kTokenizerMagic, kTokenizerVersion, (uint32_t)bpe.vocab_size(),
                                              (uint32_t)bpe.eot_token()};  // the rest zero
    AtomicFile out(path);
    out.write(header, sizeof(header));
    for (int id = 0; id < bpe.vocab_size(); ++id) {
        const std::string& bytes = bpe.token_bytes(id);
        CHECK(bytes.size() <= 255, "token %d is %zu bytes long; the format allows at most 255", id, bytes.size());
        uint8_t len = (uint8_t)bytes.size();
        out.write(&len, 1);
        out.write(bytes.data(), bytes.size());
    }
    out.commit();
}
