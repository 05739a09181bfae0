// Fuzz target: a DeepSpeed config (zero/run/deepspeed_config.h), read as such
// (comments and trailing commas too), applied to the default options, then
// DeepSpeed's batch rules for a world size taken from the input's length.
#include "test/fuzz/fuzz_util.h"
#include "zero/base/json.h"
#include "zero/run/deepspeed_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    refusal_ok([&] {
        TrainOptions o;
        o.seq_len = 64;
        apply_deepspeed_json(parse_json(std::string((const char*)data, size), "fuzz.json", true), o, false);
        resolve_deepspeed_batch(o, 1 + (int)(size % 7));
    });
    return 0;
}
