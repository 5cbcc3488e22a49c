// LoRA adapters as Hugging Face's PEFT writes and reads them:
//
//   adapter_config.json        {"peft_type": "LORA", "r": 8, "lora_alpha": 16, "target_modules": ["q_proj", ...], ...}
//   adapter_model.safetensors  base_model.model.<layer>.lora_A.weight [r, in], ....lora_B.weight [out, r]
//
// A PEFT adapter trained elsewhere loads here and one saved here loads in
// PEFT, over the same base; merge_lora (levers/nn/lora.hpp) folds it in.
// Whole weights that train beside the adapters (a mixture's routers) go in
// as PEFT's modules_to_save: base_model.model.<layer>.weight, the layers'
// last names listed in adapter_config.json.
#pragma once

#include "levers/nn/module.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace levers::models {

struct LoraSettings {
    int rank = 8;
    double alpha = 16;
    std::vector<std::string> targets;  // layer names or their last parts: "q_proj"
    std::vector<std::string> modules_to_save;  // read: the layers saved whole beside the adapters ("gate")
};

// Writes the adapters attached to `model` (nn::attach_lora) to `dir`
// (made whole or not at all); `base` is recorded as base_model_name_or_path.
void save_peft_adapter(const std::filesystem::path& dir, nn::Module& model, const LoraSettings& settings,
                       const std::string& base);

// Reads `dir`'s settings, checks every tensor against `model` (a base of
// another shape, a layer it lacks, an unsupported PEFT option are errors
// naming the tensor and both sides), attaches the adapters and sets their
// values. Returns the settings read.
LoraSettings load_peft_adapter(const std::filesystem::path& dir, nn::Module& model);

// Only the settings, checked (for a recipe's check step).
LoraSettings read_peft_settings(const std::filesystem::path& dir);

}  // namespace levers::models
