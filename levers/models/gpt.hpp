// GPT: the GPT-2 architecture (decoder-only transformer) as modules.
//
// Pre-LN blocks (x + attn(ln_1(x)), then x + mlp(ln_2(x))), learned positions,
// GELU (tanh) MLP of width 4C, a final layernorm, and the output projection tied
// to the token embedding. Parameter names are Hugging Face's without
// "transformer." (wte.weight, h.0.attn.c_attn.weight, ...).
#pragma once

#include "levers/nn/attention.hpp"
#include "levers/nn/containers.hpp"
#include "levers/nn/layers.hpp"
#include "levers/models/language_model.hpp"

#include <cstdint>

namespace levers::models {

struct GptConfig {
    int vocab_size = 256;
    int block_size = 128;  // longest context
    int n_layer = 4;
    int n_head = 4;
    int n_embd = 128;
    double dropout = 0;  // after the embeddings and each residual branch (GPT-2's embd and resid pdrop)

    void validate() const;                 // throws levers::Error naming the bad field
    std::int64_t parameter_count() const;  // without alignment padding
};

// The MLP of a block: c_proj(gelu(c_fc(x))), one fused op unless adapters are attached.
class GptMlp : public nn::Layer {
public:
    GptMlp(Module& parent, std::string name, std::int64_t channels, int layers);
    Tensor forward(const Tensor& x) override;
    nn::Linear c_fc, c_proj;
};

class GptBlock : public nn::Layer {
public:
    explicit GptBlock(const GptConfig& c);
    Tensor forward(const Tensor& x) override;
    nn::LayerNorm ln_1;
    nn::CausalSelfAttention attn;
    nn::LayerNorm ln_2;
    GptMlp mlp;
    nn::Dropout drop;
};

class Gpt : public LanguageModel {
public:
    // Initialises like GPT-2: N(0, 0.02) weights, residual projections scaled by
    // 1/√(2·n_layer), zero biases, unit layernorm gains.
    Gpt(const GptConfig& config, std::uint64_t seed);

    // tokens [B, T] (i32, usually on the host), T <= block_size: the final
    // layer's features [B, T, C], the logits [B, T, vocab], or the mean
    // next-token loss against targets [B, T] (ignoring -100) as a one-element
    // tensor, all on the model's device and differentiable.
    Tensor features(const Tensor& tokens);
    Tensor logits(const Tensor& tokens) override;
    Tensor loss(const Tensor& tokens, const Tensor& targets) override;
    std::int64_t vocab_size() const override { return config_.vocab_size; }
    std::int64_t context_length() const override { return config_.block_size; }
    std::string summary() const override;
    // No KV cache: each step runs the last block_size tokens again.
    std::unique_ptr<Decoder> decoder(std::int64_t length) override;
    // The logits of the last position of each row, [B, vocab] (what sampling needs).
    Tensor next_logits(const Tensor& tokens);

    // LoRA fine-tuning: rank-`rank` adapters (scale alpha/rank) on every
    // attention projection (c_attn and c_proj), everything else frozen. Call
    // once, after loading the weights.
    void enable_lora(int rank, double alpha, std::uint64_t seed);
    bool has_lora();
    // Folds the adapters into the frozen weights and zeroes them.
    void merge_lora();

    const GptConfig& config() const { return config_; }
    // The model's own weights by name, without LoRA adapters: what checkpoints
    // and safetensors files hold.
    std::vector<std::pair<std::string, nn::Parameter*>> weights();
    // Bytes of activations and scratch the last step held at its peak (the
    // storage pool of the model's device).
    std::size_t activation_bytes();

    nn::Embedding wte, wpe;
    nn::ModuleList<GptBlock> h;
    nn::LayerNorm ln_f;
    nn::Dropout drop;

private:
    void check_tokens(const Tensor& tokens) const;
    GptConfig config_;
};

}  // namespace levers::models
