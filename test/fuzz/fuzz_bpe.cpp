// Fuzz target: GPT-2's encoder.json and vocab.bpe (data/bpe.h). The input is
// encoder.json, a NUL byte, vocab.bpe, optionally a NUL and a text to encode
// (else a fixed one); the tokens are decoded back.
#include <vector>

#include "data/bpe.h"
#include "test/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string all((const char*)data, size);
    size_t a = all.find('\0');
    if (a == std::string::npos) return 0;
    size_t b = all.find('\0', a + 1);
    std::string encoder = all.substr(0, a), merges = all.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
    std::string text = b == std::string::npos ? std::string("Call me Ishmael. Some years ago\n\n  it's 42!") : all.substr(b + 1);
    std::string enc_path = write_scratch((const uint8_t*)encoder.data(), encoder.size(), ".json");
    std::string bpe_path = write_scratch((const uint8_t*)merges.data(), merges.size(), ".bpe");
    refusal_ok([&] {
        Bpe bpe;
        bpe.load(enc_path, bpe_path);
        std::vector<int> ids;
        bpe.encode(text, ids);
        for (int id : ids) bpe.token_bytes(id);
    });
    return 0;
}
