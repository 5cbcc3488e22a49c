// The tiny Hugging Face models of tests/reference/hf and what PyTorch
// computed from them (tests/reference/hf_models.py writes both).
#pragma once

#include "levers/core/tensor.hpp"
#include "tests/source_tree.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace levers::testing {

inline std::filesystem::path reference_dir() { return source_path("tests/reference/hf"); }

// `model`'s reference answers: tokens, targets, logits, loss, gradients, a greedy continuation.
inline nlohmann::json reference(const std::string& model) {
    std::ifstream in(reference_dir() / (model + ".json"));
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

// Token ids of the reference as an i32 tensor of its shape.
inline Tensor ids(const nlohmann::json& values, const nlohmann::json& shape) {
    return Tensor::from(values.get<std::vector<std::int32_t>>(), Shape(shape.get<std::vector<std::int64_t>>()));
}

}  // namespace levers::testing
