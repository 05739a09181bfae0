// Fuzz target: a checkpoint's state.bin (zero/engine/checkpoint.h): its header
// and run state, read as resume reads it, for the model its header names (and
// for a fixed one, as a resume of another model would).
#include <sys/stat.h>

#include "test/fuzz/fuzz_util.h"
#include "zero/engine/checkpoint.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const std::string dir = fuzz_scratch_path("_ckpt");
    mkdir(dir.c_str(), 0755);
    FILE* f = fopen((dir + "/state.bin").c_str(), "wb");
    if (!f) abort();
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    refusal_ok([&] {
        CkptHeader h = read_checkpoint_header(dir);
        RunState rs;
        read_state_file(dir, header_config(h), rs);
    });
    refusal_ok([&] {
        RunState rs;
        read_state_file(dir, gpt2_config_from_descriptor("L=2,H=4,C=64,V=512,T=32"), rs);
    });
    return 0;
}
