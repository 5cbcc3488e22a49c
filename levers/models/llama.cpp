#include "levers/models/llama.hpp"

#include "levers/core/dtype.hpp"
#include "levers/nn/checkpoint.hpp"
#include "levers/kernels/linear.hpp"
#include "levers/kernels/chunked_cross_entropy.hpp"
#include "levers/kernels/cross_entropy.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/softmax.hpp"

#include <cmath>

namespace levers::models {

namespace {
const LlamaConfig& checked(const LlamaConfig& c) {
    c.validate();
    return c;
}

nn::Attention::Options attention_options(const LlamaConfig& c, std::int64_t index) {
    const LayerAttention layer = c.layer(index);
    return {.kv_heads = c.num_key_value_heads,
            .head_dim = c.head_size(),
            .bias = c.attention_bias,
            .causal = true,
            .rope_theta = layer.rope_theta,
            .rope_scaling = layer.rope_scaling,
            .rotary_dim = c.rotary_dim(),
            .fused_qkv = c.fused_projections,
            .qk_norm_eps = c.qk_norm ? c.rms_norm_eps : 0.0,
            .qk_norm_offset = c.norm_offset,
            .sliding_window = layer.sliding_window,
            .scale = c.query_pre_attn_scalar > 0 ? 1 / std::sqrt(c.query_pre_attn_scalar) : 0.0,
            .logit_softcap = c.attn_logit_softcapping,
            .init = nn::init::normal(c.initializer_range)};
}

nn::GatedMLP::Activation activation(const LlamaConfig& c) {
    return c.hidden_act == "gelu_pytorch_tanh" ? nn::GatedMLP::Activation::gelu_tanh : nn::GatedMLP::Activation::silu;
}

std::unique_ptr<nn::RMSNorm> sandwich_norm(nn::Module& layer, const char* name, const LlamaConfig& c) {
    if (!c.sandwich_norms) return nullptr;
    auto norm = std::make_unique<nn::RMSNorm>(c.hidden_size, c.rms_norm_eps, c.norm_offset);
    layer.register_module(name, *norm);
    return norm;
}

std::unique_ptr<nn::GatedMLP> dense_mlp(nn::Module& layer, const LlamaConfig& c, std::int64_t index) {
    if (c.sparse_layer(index)) return nullptr;
    auto mlp = std::make_unique<nn::GatedMLP>(c.hidden_size, c.intermediate_size, c.mlp_bias,
                                              nn::init::normal(c.initializer_range), activation(c), c.fused_projections);
    layer.register_module("mlp", *mlp);
    return mlp;
}

std::unique_ptr<nn::SparseMoe> sparse_moe(nn::Module& layer, const LlamaConfig& c, std::int64_t index) {
    if (!c.sparse_layer(index)) return nullptr;
    auto moe = std::make_unique<nn::SparseMoe>(nn::SparseMoe::Options{
        .dim = c.hidden_size,
        .hidden = c.moe_intermediate_size,
        .experts = c.num_experts,
        .top_k = c.num_experts_per_tok,
        .norm_topk_prob = c.norm_topk_prob,
        .init = nn::init::normal(c.initializer_range),
        .activation = activation(c),
        .names = c.model_type == "mixtral" ? nn::GatedMLP::kMixtralNames : nn::GatedMLP::Names{}});
    layer.register_module(c.moe_block_name(), *moe);
    return moe;
}

// x · s with s rounded to x's dtype first, as transformers scales Gemma's embeddings (a bf16 model by bf16(s)).
Tensor scaled(const Tensor& x, double s) {
    if (s == 1) return x;
    if (x.dtype() == DType::bf16) return x * bf16_to_float(float_to_bf16(static_cast<float>(s)));
    return x * (x.dtype() == DType::f32 ? static_cast<float>(s) : s);
}
}  // namespace

LlamaLayer::LlamaLayer(const LlamaConfig& c, std::int64_t index)
    : input_layernorm(*this, "input_layernorm", c.hidden_size, c.rms_norm_eps, c.norm_offset),
      self_attn(*this, "self_attn", c.hidden_size, c.num_attention_heads, attention_options(c, index)),
      post_attention_layernorm(*this, "post_attention_layernorm", c.hidden_size, c.rms_norm_eps, c.norm_offset),
      mlp(dense_mlp(*this, c, index)),
      moe(sparse_moe(*this, c, index)),
      pre_feedforward_layernorm(sandwich_norm(*this, "pre_feedforward_layernorm", c)),
      post_feedforward_layernorm(sandwich_norm(*this, "post_feedforward_layernorm", c)) {}

Tensor LlamaLayer::forward(const Tensor& x, nn::KvCache* cache, const Tensor* documents, const Tensor* starts) {
    const Tensor a = input_layernorm(x);
    const Tensor attended = cache       ? (starts ? self_attn.forward(a, *cache, *starts) : self_attn.forward(a, *cache))
                            : documents ? self_attn.forward_packed(a, *documents)
                                        : self_attn.forward(a);
    if (!pre_feedforward_layernorm) {
        const Tensor h = x + attended;
        return h + feed_forward(post_attention_layernorm(h));
    }
    const Tensor h = x + post_attention_layernorm(attended);
    return h + (*post_feedforward_layernorm)(feed_forward((*pre_feedforward_layernorm)(h)));
}

LlamaBody::LlamaBody(Module& parent, std::string name, const LlamaConfig& c)
    : embed_tokens(*this, "embed_tokens", c.vocab_size, c.hidden_size, nn::init::normal(c.initializer_range)),
      layers(*this, "layers"),
      norm(*this, "norm", c.hidden_size, c.rms_norm_eps, c.norm_offset),
      embedding_scale(c.scale_embeddings ? std::sqrt(static_cast<double>(c.hidden_size)) : 1.0) {
    for (std::int64_t i = 0; i < c.num_hidden_layers; ++i) layers.add(c, i);
    parent.register_module(std::move(name), *this);
}

Llama::Llama(const LlamaConfig& config)
    : model(*this, "model", checked(config)),
      config_(config),
      router_losses_{.aux = config.output_router_logits ? config.router_aux_loss_coef : 0.0} {
    if (!config.tie_word_embeddings) {
        lm_head = std::make_unique<nn::Linear>(config.hidden_size, config.vocab_size, false,
                                               nn::init::normal(config.initializer_range));
        register_module("lm_head", *lm_head);
    }
}

Llama::Llama(const LlamaConfig& config, std::uint64_t seed) : Llama(config) { initialize(seed); }

nn::Parameter& Llama::head_weight() { return lm_head ? lm_head->weight : model.embed_tokens.weight; }

Tensor Llama::hidden(const Tensor& tokens, LlamaCache* cache, const Tensor* documents, const Tensor* starts) {
    LEVERS_CHECK(tokens.ndim() == 2 && tokens.dim(0) >= 1 && tokens.dim(1) >= 1 && tokens.dtype() == DType::i32,
                 "{} forward needs i32 tokens [batch, time], got {} {}", config_.model_type, name_of(tokens.dtype()),
                 tokens.shape().str());
    Tensor x = scaled(model.embed_tokens(on_device(tokens)), model.embedding_scale);
    std::size_t i = 0;
    router_logits_.clear();
    router_counts_.clear();
    // Under checkpointing a router's logits come out of the block beside its output where a loss reads them.
    const bool routed_loss = router_losses_.aux > 0 || router_losses_.z > 0;
    for (LlamaLayer& layer : model.layers) {
        Tensor side;  // the router's logits as the checkpointed block gave them, where a loss reads them
        if (checkpoint_blocks_ && !cache) {
            // The documents tensor (packed rows) is kept by the recompute, as the layer reads it again.
            const Tensor docs = documents ? *documents : Tensor();
            auto run = [&layer, docs](const Tensor& in) {
                return layer.forward(in, nullptr, docs.defined() ? &docs : nullptr);
            };
            if (layer.moe && routed_loss)
                std::tie(x, side) = nn::checkpoint_with_side(layer, x, [&layer, run](const Tensor& in) {
                    Tensor y = run(in);
                    return std::pair{y, layer.moe->router_logits()};
                });
            else
                x = nn::checkpoint(layer, x, run);
        } else {
            x = layer.forward(x, cache ? &cache->layers[i++] : nullptr, documents, starts);
        }
        if (layer.moe && !cache) {
            router_logits_.push_back(side.defined() ? side : layer.moe->router_logits());
            router_counts_.push_back(layer.moe->tokens_per_expert());
        }
    }
    return model.norm(x);
}

Tensor Llama::features(const Tensor& tokens) { return hidden(tokens, nullptr); }

Tensor Llama::head(const Tensor& h) {
    const Tensor logits = ops::linear(h, head_weight()());
    const double cap = config_.final_logit_softcapping;
    return cap > 0 ? ops::tanh(logits * (1 / cap)) * cap : logits;
}

Tensor Llama::logits(const Tensor& tokens) { return head(features(tokens)); }

namespace {
// The mean next-token loss of features h: in chunks of rows, so a 128K-token
// vocabulary's logits are never held for every position at once; soft-capped
// logits (Gemma 2) whole, as the cap sits between the product and the loss.
Tensor next_token_loss(Llama& model, const Tensor& h, const Tensor& targets) {
    if (model.config().final_logit_softcapping > 0) return ops::cross_entropy(model.head(h), targets);
    return ops::chunked_linear_cross_entropy(h, model.head_weight()(), targets);
}
}  // namespace

Tensor Llama::loss(const Tensor& tokens, const Tensor& targets) {
    LEVERS_CHECK(targets.shape() == tokens.shape(), "{} loss: targets {} do not match tokens {}", config_.model_type,
                 targets.shape().str(), tokens.shape().str());
    return with_router_losses(next_token_loss(*this, features(tokens), on_device(targets)));
}

Tensor Llama::with_router_losses(const Tensor& loss) {
    if (router_logits_.empty() || !training()) return loss;
    Tensor out = loss;
    if (router_losses_.aux > 0) out = out + ops::cast(aux_loss(), loss.dtype()) * router_losses_.aux;
    if (router_losses_.z > 0) out = out + ops::cast(z_loss(), loss.dtype()) * router_losses_.z;
    return out;
}

Tensor Llama::aux_loss() {
    if (router_logits_.empty()) return Tensor::zeros({1}, DType::f32, device()).view({});
    const Device where = router_logits_.front().device();
    const std::int64_t experts = config_.num_experts;
    const DType acc = ops::accumulator(router_logits_.front().dtype());
    // P_e summed over every layer's tokens; f_e from the choices the blocks made (constants: no gradient flows
    // through a count).
    Tensor probability_sum;
    std::vector<double> chosen(static_cast<std::size_t>(experts), 0.0);
    std::int64_t rows = 0;
    for (std::size_t l = 0; l < router_logits_.size(); ++l) {
        const Tensor s = ops::sum(ops::softmax(ops::cast(router_logits_[l], acc), -1), {0});
        probability_sum = probability_sum.defined() ? probability_sum + s : s;
        for (std::size_t e = 0; e < chosen.size(); ++e) chosen[e] += static_cast<double>(router_counts_[l][e]);
        rows += router_logits_[l].dim(0);
    }
    const double n = static_cast<double>(rows);
    for (double& c : chosen) c *= static_cast<double>(experts) / (n * n);  // E · f_e / rows: P_e's mean is sum / rows
    const Tensor weights = Tensor::from(chosen, {experts}).to(where, acc);
    return ops::sum(probability_sum * weights, {0});
}

Tensor Llama::z_loss() {
    if (router_logits_.empty()) return Tensor::zeros({1}, DType::f32, device()).view({});
    Tensor total;
    std::int64_t rows = 0;
    for (const Tensor& logits : router_logits_) {
        const Tensor lse = ops::logsumexp(ops::cast(logits, ops::accumulator(logits.dtype())), {-1});
        const Tensor s = ops::sum(lse * lse, {0});
        total = total.defined() ? total + s : s;
        rows += logits.dim(0);
    }
    return total * (1.0 / static_cast<double>(rows));
}

Tensor Llama::loss(const Tensor& tokens, const Tensor& targets, const Tensor& documents) {
    LEVERS_CHECK(targets.shape() == tokens.shape() && documents.shape() == tokens.shape(),
                 "{} loss: targets {} and documents {} must match tokens {}", config_.model_type, targets.shape().str(),
                 documents.shape().str(), tokens.shape().str());
    return with_router_losses(next_token_loss(*this, hidden(tokens, nullptr, &documents), on_device(targets)));
}

Tensor Llama::token_logprobs(const Tensor& tokens, const Tensor& targets, const Tensor* documents) {
    LEVERS_CHECK(targets.shape() == tokens.shape() && (!documents || documents->shape() == tokens.shape()),
                 "{} token_logprobs: targets {} (and documents) must match tokens {}", config_.model_type,
                 targets.shape().str(), tokens.shape().str());
    const Tensor h = hidden(tokens, nullptr, documents);
    const std::int64_t rows = tokens.numel();
    const Tensor host = targets.to(Device::cpu()).contiguous();
    std::vector<std::int32_t> keep, picked;
    for (std::int64_t r = 0; r < rows; ++r)
        if (const std::int32_t t = host.data<std::int32_t>()[r]; t != -100) {
            keep.push_back(static_cast<std::int32_t>(r));
            picked.push_back(t);
        }
    Tensor out = Tensor::zeros({rows}, DType::f32, h.device());
    if (keep.empty()) return out.view(tokens.shape());
    const auto n = static_cast<std::int64_t>(keep.size());
    const Tensor index = Tensor::from(keep, {n}).to(h.device());
    const Tensor x = ops::index_select(h.view({rows, h.dim(2)}), 0, index);
    // Scored in f32 whatever the run computes in: a sequence's sum of a few hundred bf16 log-probabilities
    // would carry bf16's rounding into the preference margin.
    const Tensor logp = ops::log_softmax(ops::cast(head(x), DType::f32), -1);
    const Tensor chosen = ops::gather(logp, 1, Tensor::from(picked, {n, 1}).to(h.device())).view({n});
    return ops::scatter_add(out, 0, index, chosen).view(tokens.shape());
}

LlamaCache Llama::new_cache(std::int64_t capacity) const {
    LlamaCache cache;
    cache.layers.reserve(static_cast<std::size_t>(config_.num_hidden_layers));
    for (std::int64_t i = 0; i < config_.num_hidden_layers; ++i) cache.layers.emplace_back(capacity);
    return cache;
}

Tensor Llama::next_logits(const Tensor& tokens, LlamaCache& cache) { return last_logits(tokens, cache, nullptr); }

Tensor Llama::next_logits(const Tensor& tokens, LlamaCache& cache, const Tensor& starts) {
    const Tensor s = on_device(starts);
    return last_logits(tokens, cache, &s);
}

Tensor Llama::last_logits(const Tensor& tokens, LlamaCache& cache, const Tensor* starts) {
    LEVERS_CHECK(cache.layers.size() == static_cast<std::size_t>(config_.num_hidden_layers),
                 "next_logits: a cache for {} layers given to a model of {}", cache.layers.size(),
                 config_.num_hidden_layers);
    const Tensor h = hidden(tokens, &cache, nullptr, starts);
    const std::int64_t time = h.dim(1);
    return head(h.narrow(1, time - 1, 1).squeeze(1));
}

std::string Llama::summary() const {
    const LlamaConfig& c = config_;
    std::string experts;
    if (c.num_experts > 0)
        experts = fmt::format(", {} experts (top {}) in {} of {} layers", c.num_experts, c.num_experts_per_tok,
                              c.sparse_layers(), c.num_hidden_layers);
    return fmt::format("{}, {} layers x {}, {} heads ({} key-value) of {}, vocabulary {}{}", c.model_type,
                       c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_size(),
                       c.vocab_size, experts);
}

namespace {
class LlamaDecoder : public LanguageModel::Decoder {
public:
    LlamaDecoder(Llama& model, std::int64_t length) : model_(model), cache_(model.new_cache(length)) {}
    Tensor next(const std::vector<std::int32_t>& tokens) override {
        const auto t = static_cast<std::int64_t>(tokens.size());
        return model_.next_logits(Tensor::from(tokens, {1, t}), cache_).to(Device::cpu(), DType::f32).reshape({-1});
    }

private:
    Llama& model_;
    LlamaCache cache_;
};
}  // namespace

std::unique_ptr<LanguageModel::Decoder> Llama::decoder(std::int64_t length) {
    LEVERS_CHECK(length >= 1 && length <= config_.max_position_embeddings,
                 "{}: generation of {} positions; the model takes 1..{} (max_position_embeddings)", config_.model_type,
                 length, config_.max_position_embeddings);
    return std::make_unique<LlamaDecoder>(*this, length);
}

std::vector<std::pair<std::string, nn::Parameter*>> Llama::weights() {
    std::vector<std::pair<std::string, nn::Parameter*>> out;
    for (const auto& [name, p] : named_parameters())
        if (p->name() != "lora_a" && p->name() != "lora_b") out.emplace_back(name, p);
    return out;
}

}  // namespace levers::models
