// GPT checkpoints: the config and every parameter, in levers' checkpoint file
// (levers/core/checkpoint.hpp).
#pragma once

#include "levers/models/gpt.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>

namespace levers::models {

// Writes the model's config and parameters (rank 0 calls it); `extra` is
// merged into the metadata (recipe, step, ...).
void save_gpt(const std::filesystem::path& path, Gpt& model, const nlohmann::json& extra = {});

// A GPT rebuilt from a save_gpt file. Refuses, naming the file, a checkpoint
// of another model kind or one whose tensors do not fit the config.
std::unique_ptr<Gpt> load_gpt(const std::filesystem::path& path);

}  // namespace levers::models
