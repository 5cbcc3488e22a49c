// The configuration of a Llama-family decoder, as Hugging Face's config.json
// gives it: model_type llama (Llama 2, 3, 3.1, 3.2), mistral, qwen2 or qwen3.
// What differs across the family is a field here: grouped-query heads
// (num_key_value_heads), q/k/v biases (qwen2; attention_bias elsewhere),
// per-head RMSNorm of q and k (qwen3), a head_dim of its own, llama3 rope
// scaling, a sliding window (mistral), tied output embeddings.
#pragma once

#include "levers/nn/rotary.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace levers::models {

struct LlamaConfig {
    std::string model_type = "llama";  // llama, mistral, qwen2 or qwen3
    std::int64_t vocab_size = 32000, hidden_size = 512, intermediate_size = 1376;
    std::int64_t num_hidden_layers = 8, num_attention_heads = 8, num_key_value_heads = 8;
    std::int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
    std::int64_t max_position_embeddings = 2048;
    double rms_norm_eps = 1e-5, rope_theta = 10000, initializer_range = 0.02;
    std::optional<nn::Llama3RopeScaling> rope_scaling;
    bool attention_bias = false;  // on q, k and v (always for qwen2)
    bool mlp_bias = false;
    bool qk_norm = false;          // qwen3
    std::int64_t sliding_window = 0;  // mistral: a query sees this many keys, itself included (0: all)
    bool tie_word_embeddings = false;
    std::vector<std::int64_t> eos_token_ids;
    std::int64_t bos_token_id = -1;
    std::string torch_dtype = "float32";  // how the weights are stored: float32, bfloat16 or float16
    nlohmann::json original;  // the config.json read, written back unchanged but for torch_dtype

    std::int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
    // Throws levers::Error naming the field and what would be valid.
    void validate() const;
    std::int64_t parameter_count() const;
    // Hugging Face's config.json for this configuration: the one read, with
    // torch_dtype as it is now, or one made from the fields above (with the
    // architecture's name) for a model made here.
    nlohmann::json to_json() const;
};

// Reads a config.json (`source` names it in errors): an unsupported
// model_type, rope_scaling, activation or a missing field is refused naming
// the supported ones.
LlamaConfig parse_llama_config(const nlohmann::json& j, const std::string& source);
LlamaConfig read_llama_config(const std::filesystem::path& config_json);

// The model types levers reads, for messages: "llama, mistral, qwen2, qwen3".
const char* supported_model_types();

}  // namespace levers::models
