// The safetensors format (Hugging Face): an 8-byte little-endian header length,
// a JSON header naming each tensor's dtype, shape and byte range, then the
// bytes. Reading checks every length and range and executes nothing; F32, F16
// and BF16 tensors are read as f32.
#pragma once

#include "framework/core/tensor.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace levers::data {

struct SafeTensors {
    std::map<std::string, Tensor> tensors;         // f32, by name
    std::map<std::string, std::string> metadata;   // the header's "__metadata__"
};

// Throws levers::Error naming the file and the fault (truncated, a range past
// the end, an unsupported dtype, ...).
SafeTensors read_safetensors(const std::filesystem::path& path);

// Writes f32 tensors (name -> tensor, in name order) atomically.
void write_safetensors(const std::filesystem::path& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace levers::data
