// Fuzz target: a checkpoint's MANIFEST (zero/engine/checkpoint_manifest.h).
// Whatever it accepts must print back to the same text.
#include "test/fuzz/fuzz_util.h"
#include "zero/engine/checkpoint_manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    CheckpointManifest m, again;
    std::string why;
    if (!parse_manifest(std::string((const char*)data, size), m, why)) {
        if (why.empty()) abort();  // a refusal always says why
        return 0;
    }
    std::string text = m.to_text();
    if (!parse_manifest(text, again, why) || again.to_text() != text) abort();
    return 0;
}
