// Fuzz target: an llm.c model file (zero/layout/model_file.h), its header and,
// for a model small enough, every unit read back as fp32.
#include <vector>

#include "test/fuzz/fuzz_util.h"
#include "zero/layout/model_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string path = write_scratch(data, size);
    refusal_ok([&] {
        ModelFile mf(path);
        ParamLayout layout(mf.cfg);
        if (layout.file_numel() > (1u << 22)) return;  // the size matched: reading it is plain I/O
        for (int u = 0; u < layout.num_units(); u++) {
            std::vector<float> unit(layout.unit_spec(u).numel + 64);
            mf.read_unit(layout, u, unit.data());
        }
    });
    return 0;
}
