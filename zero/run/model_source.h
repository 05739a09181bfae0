// Where a model's parameters come from, for the commands that read a model
// without training it (--sample, --export_hf): an llm.c model file, a
// checkpoint folder (its model.bin) or a Hugging Face folder (config.json +
// model.safetensors). Each gives the model's shape and a filler of its units.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "zero/base/common.h"
#include "zero/layout/hf_gpt2.h"
#include "zero/layout/model_file.h"

struct ModelSource {
    std::string description;  // "an llm.c model file", ...
    GPT2Config cfg;
    std::function<void(const ParamLayout&, int u, float* dst)> read_unit;
};

// A source reading through `reader` (an HfGpt2Reader or a ModelFile), which it keeps.
template <typename Reader>
ModelSource model_source(std::shared_ptr<Reader> reader, const char* description) {
    return {description, reader->cfg,
            [reader](const ParamLayout& l, int u, float* dst) { reader->read_unit(l, u, dst); }};
}

inline ModelSource hf_model_source(const std::string& dir) {
    return model_source(std::make_shared<HfGpt2Reader>(dir), "a Hugging Face folder");
}

inline ModelSource model_file_source(const std::string& file, const char* description = "an llm.c model file") {
    return model_source(std::make_shared<ModelFile>(file), description);
}

// Whichever of the three `path` is; `flag` names the option in the error.
inline ModelSource open_model_source(const std::string& path, const char* flag) {
    if (file_exists(path + "/config.json")) return hf_model_source(path);
    if (file_exists(path + "/model.bin")) return model_file_source(path + "/model.bin", "a checkpoint's model.bin");
    CHECK(file_exists(path), "%s %s: no such model file, checkpoint or Hugging Face folder", flag, path.c_str());
    return model_file_source(path);
}
