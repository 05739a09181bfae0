// Fuzz target: a safetensors file (zero/layout/safetensors.h), as --from_hf
// reads one: the header validated, then every tensor small enough read as fp32
// with the shape its header gives.
#include "test/fuzz/fuzz_util.h"
#include "zero/layout/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = write_scratch(data, size, ".safetensors");
    refusal_ok([&] {
        SafetensorsReader st(path);
        for (const SafetensorsTensor& t : st.tensors())
            if (t.numel() <= (1u << 20)) st.read_f32(t.name, t.shape);  // larger: the same code on more bytes
    });
    return 0;
}
