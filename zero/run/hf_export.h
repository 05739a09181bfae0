// --export_hf: a model file (or a Hugging Face folder) written as a Hugging
// Face GPT-2 folder that transformers' GPT2LMHeadModel.from_pretrained loads.
// The format itself is zero/layout/hf_gpt2.h; the source is zero/run/model_source.h's.
#pragma once

#include <string>
#include <vector>

#include "zero/base/common.h"
#include "zero/layout/hf_gpt2.h"
#include "zero/run/model_source.h"

// Exactly one of model_file (an llm.c model file, fp32 or bf16) and hf_dir is
// the source; out_dir receives config.json and model.safetensors (fp32).
inline void export_hf_folder(const std::string& model_file, const std::string& hf_dir, const std::string& out_dir) {
    CHECK(!hf_dir.empty() || file_exists(model_file),
          "--export_hf needs a model: -e FILE (an llm.c model file), --from_hf DIR or --consolidate CHECKPOINT%s%s",
          model_file.empty() ? "" : "; no file ", model_file.c_str());
    ModelSource src = model_file.empty() ? hf_model_source(hf_dir) : model_file_source(model_file);
    ParamLayout layout(src.cfg);
    std::vector<std::vector<float>> units(layout.num_units());
    for (int u = 0; u < layout.num_units(); ++u) {
        units[u].assign(layout.unit_spec(u).numel, 0.0f);
        src.read_unit(layout, u, units[u].data());
    }
    write_hf_gpt2(out_dir, layout, [&](int u) { return units[u].data(); });
    printf("wrote %s/config.json and %s/model.safetensors (%s, fp32) from %s\n", out_dir.c_str(), out_dir.c_str(),
           describe_config(src.cfg).c_str(), model_file.empty() ? hf_dir.c_str() : model_file.c_str());
}
