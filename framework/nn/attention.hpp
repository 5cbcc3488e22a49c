// Attention modules. CausalSelfAttention is GPT-2's: c_attn makes q, k and v
// from x [B, T, C] in one product, each head attends to the positions before
// it, c_proj mixes the heads; it runs the fused kernel
// (kernels/flash_attention.hpp) where it applies, the packed op elsewhere.
// Attention is the general one (Llama's, Mistral's, Qwen's): separate q, k
// and v projections, fewer key-value heads than query heads (grouped-query
// attention), rotary embeddings, a mask, causal or not; written from matmul
// and softmax, it takes the packed kernels where the shapes allow.
#pragma once

#include "framework/nn/layers.hpp"
#include "framework/nn/rotary.hpp"

#include <memory>

namespace levers::nn {

class CausalSelfAttention : public Layer {
public:
    CausalSelfAttention(std::int64_t channels, std::int64_t heads, Init proj_init = init::fan_in_uniform(),
                        Init qkv_init = init::fan_in_uniform());
    CausalSelfAttention(Module& parent, std::string name, std::int64_t channels, std::int64_t heads,
                        Init proj_init = init::fan_in_uniform(), Init qkv_init = init::fan_in_uniform());
    Tensor forward(const Tensor& x) override;

    Linear c_attn, c_proj;
    std::int64_t heads;
};

class Attention : public Layer {
public:
    struct Options {
        std::int64_t kv_heads = 0;  // 0: as many as the query heads
        std::int64_t head_dim = 0;  // 0: dim / heads
        bool bias = false;          // on q, k and v (Qwen 2's); o_proj has none
        bool causal = true;
        double rope_theta = 0;      // > 0: rotary embeddings on q and k with this base
    };
    Attention(std::int64_t dim, std::int64_t heads, Options options);
    Attention(Module& parent, std::string name, std::int64_t dim, std::int64_t heads, Options options);
    // x [B, T, dim] to [B, T, dim], positions from 0.
    Tensor forward(const Tensor& x) override;
    // With a mask, bool, broadcast to [B, heads, T, T]: true where a query
    // may attend to a key (on top of causality, when causal).
    Tensor forward(const Tensor& x, const Tensor& mask);

    Linear q_proj, k_proj, v_proj, o_proj;
    std::unique_ptr<RotaryEmbedding> rotary;  // when rope_theta > 0
    const std::int64_t heads, kv_heads, head_dim;
    const bool causal;

private:
    struct Checked {};  // the options have their defaults filled in and are valid
    Attention(std::int64_t dim, std::int64_t heads, Options options, Checked);
    Tensor attend(const Tensor& x, const Tensor* mask);
};

}  // namespace levers::nn
