// The configuration of the decoder, as Hugging Face's config.json gives it:
// model_type llama (Llama 2, 3, 3.1, 3.2), mistral, qwen2, qwen3, smollm3,
// gemma2, gemma3_text or phi3. What differs across these is a field here, not
// another model: grouped-query heads (num_key_value_heads), q/k/v biases
// (qwen2; attention_bias elsewhere), per-head RMSNorm of q and k (qwen3,
// gemma3_text), a head_dim of its own, rope scaling (llama3, linear), a
// sliding window (mistral's on every layer; per layer by layer_types in
// gemma2, gemma3_text and smollm3), layers without rotary embeddings
// (smollm3's no_rope_layers), Gemma's norms (1 + weight, after attention and
// around the MLP too), GeGLU, scaled embeddings and queries and soft-capped
// scores and logits (gemma2), tied output embeddings, Phi-3's fused
// qkv_proj and gate_up_proj, partial rotation and longrope scaling; and the
// mixtures of experts, mixtral and qwen3_moe: a sparse MoE block for the MLP
// of every decoder_sparse_step-th layer not in mlp_only_layers.
#pragma once

#include "levers/nn/rotary.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace levers::models {

// What one layer's attention is: its window and its rotary embeddings.
struct LayerAttention {
    std::int64_t sliding_window = 0;  // a query sees this many keys, itself included (0: all)
    double rope_theta = 0;            // 0: no rotary embeddings (smollm3's NoPE layers)
    std::optional<nn::RopeScaling> rope_scaling;
};

struct LlamaConfig {
    std::string model_type = "llama";  // one of supported_model_types()
    std::int64_t vocab_size = 32000, hidden_size = 512, intermediate_size = 1376;
    std::int64_t num_hidden_layers = 8, num_attention_heads = 8, num_key_value_heads = 8;
    std::int64_t head_dim = 0;  // 0: hidden_size / num_attention_heads
    std::int64_t max_position_embeddings = 2048;
    double rms_norm_eps = 1e-5, rope_theta = 10000, initializer_range = 0.02;
    std::optional<nn::RopeScaling> rope_scaling;  // of the global (full attention) layers
    double partial_rotary_factor = 1;  // the part of each head that rotates (phi3's Phi-4-mini: 0.75)
    bool fused_projections = false;    // phi3: qkv_proj and gate_up_proj, each one product
    bool attention_bias = false;  // on q, k and v (always for qwen2)
    bool mlp_bias = false;
    bool qk_norm = false;          // qwen3, gemma3_text
    std::int64_t sliding_window = 0;  // a query sees this many keys, itself included (0: all): every layer's
                                      // (mistral) or the sliding layers' (layer_types)
    bool tie_word_embeddings = false;
    std::string hidden_act = "silu";  // the gated MLP's: silu (SwiGLU) or gelu_pytorch_tanh (GeGLU, Gemma's)
    // Per layer (empty: every layer alike): "full_attention" or "sliding_attention";
    // 1 where the layer rotates q and k, 0 where it does not (smollm3).
    std::vector<std::string> layer_types;
    std::vector<int> no_rope_layers;
    double rope_local_base_freq = 0;  // gemma3_text: the sliding layers' rope base, unscaled (0: rope_theta)
    // Gemma's: norms of 1 + weight, norms after attention and around the MLP
    // (post_attention_layernorm on attention's output, pre_/post_feedforward_layernorm),
    // the embeddings times sqrt(hidden_size), the scores scaled by
    // query_pre_attn_scalar^-1/2, and soft caps (cap · tanh(x / cap); 0: none).
    double norm_offset = 0;
    bool sandwich_norms = false;
    bool scale_embeddings = false;
    double query_pre_attn_scalar = 0;  // 0: head_size()
    double attn_logit_softcapping = 0, final_logit_softcapping = 0;
    // Mixtures of experts (mixtral: num_local_experts; qwen3_moe: num_experts; 0: a dense model): each token's
    // top num_experts_per_tok experts, their weights renormalised where norm_topk_prob (always in Mixtral), each
    // a gated MLP of moe_intermediate_size (Mixtral's: intermediate_size); the dense layers among them
    // (qwen3_moe's mlp_only_layers) keep intermediate_size. Training adds router_aux_loss_coef times the
    // load-balancing loss where output_router_logits, as transformers does.
    std::int64_t num_experts = 0, num_experts_per_tok = 0, moe_intermediate_size = 0;
    bool norm_topk_prob = true;
    std::int64_t decoder_sparse_step = 1;
    std::vector<std::int64_t> mlp_only_layers;
    double router_aux_loss_coef = 0.001;
    bool output_router_logits = false;
    std::vector<std::int64_t> eos_token_ids;
    std::int64_t bos_token_id = -1;
    std::string torch_dtype = "float32";  // how the weights are stored: float32, bfloat16 or float16
    nlohmann::json original;  // the config.json read, written back unchanged but for torch_dtype

    std::int64_t head_size() const { return head_dim > 0 ? head_dim : hidden_size / num_attention_heads; }
    // The elements of a head that rotate: int(head_size · partial_rotary_factor), as transformers rounds it.
    std::int64_t rotary_dim() const {
        return static_cast<std::int64_t>(static_cast<double>(head_size()) * partial_rotary_factor);
    }
    LayerAttention layer(std::int64_t index) const;
    // Whether layer `index`'s MLP is a mixture of experts; how many layers' are.
    bool sparse_layer(std::int64_t index) const;
    std::int64_t sparse_layers() const;
    // The name of a sparse layer's MoE block: block_sparse_moe (Mixtral) or mlp.
    const char* moe_block_name() const { return model_type == "mixtral" ? "block_sparse_moe" : "mlp"; }
    // Throws levers::Error naming the field and what would be valid.
    void validate() const;
    std::int64_t parameter_count() const;
    // The parameters one token computes with: the experts it is routed to, not all of them.
    std::int64_t active_parameter_count() const;
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

// The model types levers reads, for messages: "llama, mistral, qwen2, ...".
const char* supported_model_types();

}  // namespace levers::models
