// Fuzz target: gpt2_tokenizer.bin (data/tokenizer.h), loaded, then every id
// decoded (and some that are not ids).
#include "data/tokenizer.h"
#include "test/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = write_scratch(data, size);
    refusal_ok([&] {
        Tokenizer t;
        t.load(path);
        size_t n = 0;
        for (int id = -2; id <= t.vocab_size + 1; id++) n += t.decode(id).size();
        if (n == (size_t)-1) abort();
    });
    return 0;
}
