// Hugging Face directories saved with bitsandbytes' 4-bit quantization
// (config.json's quantization_config: quant_method "bitsandbytes",
// load_in_4bit): each quantized Linear weight stored as its packed codes (U8
// [n / 2, 1]) beside `<weight>.absmax` (F32, or U8 with double
// quantization), `.quant_map` (the 16 code values), `.nested_absmax` and
// `.nested_quant_map` (double quantization's) and
// `.quant_state.bitsandbytes__nf4|fp4` (U8: JSON of the quant type, block
// size, shape and the nested offset). Read into levers' 4-bit weights
// (levers/kernels/quant4.hpp) as they are, and written so.
#pragma once

#include "levers/kernels/quant4.hpp"
#include "levers/models/hf_dir.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace levers::models {

// What config.json's quantization_config says, where it has one: bitsandbytes' 4-bit is read (its type
// and double quantization); any other method (gptq, awq, fp8, bitsandbytes' 8-bit, ...) is an error
// naming the file and what levers reads.
std::optional<ops::Quant4Spec> bnb_4bit_config(const LlamaConfig& config, const std::filesystem::path& config_json);
// config.json's quantization_config for weights held as `spec` says (transformers' keys).
nlohmann::json bnb_quantization_config(const ops::Quant4Spec& spec, const std::string& compute_dtype);

// Whether weight `name` is stored in 4 bits (its quant_state beside it).
bool stored_in_4bit(const HfWeights& w, const std::string& name);
// Whether `name` is one of the tensors bitsandbytes stores beside a 4-bit weight.
bool is_4bit_state(const std::string& name);
// Checks a 4-bit weight as stored against `shape` (what the config makes it), reading its state alone:
// every tensor present and of its dtype and size, the quant type known, its code book bitsandbytes'.
void check_4bit_weight(const std::filesystem::path& dir, const HfWeights& w, const std::string& name,
                       const Shape& shape);
// Reads it (checked as above): its codes and scales on the host.
ops::Quantized4 read_4bit_weight(const std::filesystem::path& dir, const HfWeights& w, const std::string& name,
                                 const Shape& shape);
// The tensors bitsandbytes stores for weight `name` held as `q` (host tensors; the state's F32 ones are
// named by `f32_names`, to be written as F32 whatever the model's dtype). `dtype` is the weights'
// torch_dtype, recorded in the state.
std::vector<std::pair<std::string, Tensor>> bnb_4bit_tensors(const std::string& name, const ops::Quantized4& q,
                                                             const std::string& dtype,
                                                             std::vector<std::string>& f32_names);

}  // namespace levers::models
