// One decoder for the families config.json names (llama_config.hpp: Llama
// 2/3.x, Mistral, Qwen 2/2.5, Qwen 3, SmolLM3, Gemma 2, Gemma 3's text models):
//
//   h = embed_tokens(tokens)                             (· sqrt(hidden): Gemma)
//   per layer: h += self_attn(input_layernorm(h))       RMSNorm, grouped-query attention with
//              h += mlp(post_attention_layernorm(h))    rotary embeddings; SwiGLU or GeGLU MLP
//   logits = lm_head(norm(h))                            lm_head tied to embed_tokens or its own
//
// Gemma's layers norm each branch's output too:
//   h += post_attention_layernorm(self_attn(input_layernorm(h)))
//   h += post_feedforward_layernorm(mlp(pre_feedforward_layernorm(h)))
// Each layer's attention (its window, its rotary base, or none) is
// LlamaConfig::layer's. A sparse layer's MLP is a mixture of experts
// (mixtral's block_sparse_moe, qwen3_moe's mlp: nn::SparseMoe); training adds
// the routers' load-balancing loss (and a z-loss where asked) to the loss.
// Parameter names are Hugging Face's (model.layers.0.self_attn.q_proj.weight,
// lm_head.weight), so a directory's tensors go where their names say.
#pragma once

#include "levers/nn/attention.hpp"
#include "levers/nn/containers.hpp"
#include "levers/nn/gated_mlp.hpp"
#include "levers/nn/layers.hpp"
#include "levers/nn/sparse_moe.hpp"
#include "levers/models/language_model.hpp"
#include "levers/models/llama_config.hpp"

#include <memory>
#include <string>
#include <vector>

namespace levers::models {

class LlamaLayer : public nn::Module {
public:
    LlamaLayer(const LlamaConfig& c, std::int64_t index);
    // With a cache (generation; `starts`, each query's first key, for a padded batch: attention.hpp)
    // or documents (packed rows: attention.hpp's forward_packed), or neither.
    Tensor forward(const Tensor& x, nn::KvCache* cache = nullptr, const Tensor* documents = nullptr,
                   const Tensor* starts = nullptr);
    nn::RMSNorm input_layernorm;
    nn::Attention self_attn;
    nn::RMSNorm post_attention_layernorm;
    std::unique_ptr<nn::GatedMLP> mlp;   // a dense layer's
    std::unique_ptr<nn::SparseMoe> moe;  // a sparse layer's (registered as mlp, or Mixtral's block_sparse_moe)
    std::unique_ptr<nn::RMSNorm> pre_feedforward_layernorm, post_feedforward_layernorm;  // Gemma's

private:
    Tensor feed_forward(const Tensor& x) { return moe ? (*moe)(x) : (*mlp)(x); }
};

// Hugging Face's LlamaModel: the embeddings, the layers and the final norm.
class LlamaBody : public nn::Module {
public:
    LlamaBody(Module& parent, std::string name, const LlamaConfig& c);
    nn::Embedding embed_tokens;
    nn::ModuleList<LlamaLayer> layers;
    nn::RMSNorm norm;
    // The embeddings' factor: sqrt(hidden_size) for Gemma, else 1.
    const double embedding_scale;
};

// What generation keeps between steps: one KV cache per layer.
struct LlamaCache {
    std::vector<nn::KvCache> layers;
    std::int64_t length() const { return layers.empty() ? 0 : layers.front().length; }
    // Keeps the batch rows `rows` (i32) in every layer: finished sequences dropped.
    void keep_rows(const Tensor& rows) {
        for (nn::KvCache& c : layers) c.keep_rows(rows);
    }
};

class Llama : public LanguageModel {
public:
    // Random weights (N(0, initializer_range), unit norms), as transformers
    // initialises a new model; loading a directory replaces them.
    Llama(const LlamaConfig& config, std::uint64_t seed);
    // Declared only: nothing is allocated until first use (weights loaded, or
    // drawn from seed 0), so the names and shapes cost nothing to ask.
    explicit Llama(const LlamaConfig& config);

    // tokens [B, T] (i32, usually on the host): the final norm's output
    // [B, T, hidden], the logits [B, T, vocab], or the mean next-token loss
    // against targets [B, T] (ignoring -100) as a one-element tensor.
    Tensor features(const Tensor& tokens);
    Tensor logits(const Tensor& tokens) override;
    Tensor loss(const Tensor& tokens, const Tensor& targets) override;
    // Packed rows: `documents` (i32 [B, T], non-decreasing along a row)
    // numbers each position's document; attention stays within documents
    // and positions restart at each, so the loss equals the documents' run
    // one by one (weighted by their counted targets).
    Tensor loss(const Tensor& tokens, const Tensor& targets, const Tensor& documents);
    // Per position, log p(target | what precedes) in f32 [B, T], 0 where the
    // target is -100; differentiable (preference and RL losses sum them per
    // sequence). `documents` as loss's, or null for rows of one sequence.
    // Only the counted positions reach the head.
    Tensor token_logprobs(const Tensor& tokens, const Tensor& targets, const Tensor* documents = nullptr);
    std::int64_t vocab_size() const override { return config_.vocab_size; }
    std::int64_t context_length() const override { return config_.max_position_embeddings; }
    std::string summary() const override;
    // With the KV cache: the prompt runs once, then one position per step.
    std::unique_ptr<Decoder> decoder(std::int64_t length) override;
    // Generation: the logits [B, vocab] of the last of `tokens` [B, T], which
    // follow the positions `cache` holds (made with room for `capacity`
    // positions by new_cache). Under InferenceMode.
    LlamaCache new_cache(std::int64_t capacity) const;
    Tensor next_logits(const Tensor& tokens, LlamaCache& cache);
    // The same for rows of different lengths: `starts` (i32 [B, T]) is the
    // first position each query sees (a row's left padding unseen).
    Tensor next_logits(const Tensor& tokens, LlamaCache& cache, const Tensor& starts);

    // The logits of features [..., hidden], soft-capped where the config says (Gemma 2).
    Tensor head(const Tensor& features);
    // The output projection's weight [vocab, hidden]: lm_head's, or the embeddings when tied.
    nn::Parameter& head_weight();
    const LlamaConfig& config() const { return config_; }
    // The model's own weights by Hugging Face name, without LoRA adapters.
    std::vector<std::pair<std::string, nn::Parameter*>> weights();

    // Mixtures of experts. What loss() adds for the routers: aux times the
    // load-balancing loss (transformers' load_balancing_loss_func over every
    // sparse layer's router, all tokens counted: E · Σ_e f_e · P_e, f_e the
    // share of the (token, choice) pairs expert e took, P_e its mean
    // probability), z times the router z-loss (the mean over tokens and
    // layers of logsumexp(router logits)²). By default aux is the config's
    // router_aux_loss_coef where output_router_logits, z is 0. In evaluation
    // mode loss() is the next-token loss alone.
    struct RouterLosses {
        double aux = 0, z = 0;
    };
    void set_router_losses(RouterLosses losses) { router_losses_ = losses; }
    RouterLosses router_losses() const { return router_losses_; }
    // The last forward's (without a cache): the two losses, differentiable (zero for a dense model), and the
    // tokens each expert took in each sparse layer.
    Tensor aux_loss();
    Tensor z_loss();
    const std::vector<std::vector<std::int64_t>>& tokens_per_expert() const { return router_counts_; }

    LlamaBody model;
    std::unique_ptr<nn::Linear> lm_head;  // absent when tied

private:
    Tensor hidden(const Tensor& tokens, LlamaCache* cache, const Tensor* documents = nullptr,
                  const Tensor* starts = nullptr);
    Tensor last_logits(const Tensor& tokens, LlamaCache& cache, const Tensor* starts);
    Tensor with_router_losses(const Tensor& loss);
    LlamaConfig config_;
    RouterLosses router_losses_;
    std::vector<Tensor> router_logits_;  // the last forward's, per sparse layer: [tokens, experts]
    std::vector<std::vector<std::int64_t>> router_counts_;  // and the tokens each expert took
};

}  // namespace levers::models
