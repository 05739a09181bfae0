// Fuzz target: an llm.c token shard (data/dataloader.h): the header check, and
// the loader over it (validation, batches with the vocabulary check, a saved
// position restored) for a small B and T taken from the input's length.
#include "data/dataloader.h"
#include "test/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = write_scratch(data, size);
    refusal_ok([&] {
        read_shard_header(path);
        DataLoader loader;
        int B = 1 + (int)(size % 3), T = 1 + (int)(size % 5);
        loader.init(path, B, T, (int)(size % 2), 2, size % 4 == 0, 7);
        loader.set_vocab_check(512);
        DataLoader::State s = loader.state();
        for (int i = 0; i < 5; i++) loader.next_batch();
        loader.restore(s);
        loader.next_batch();
    });
    return 0;
}
