// A Llama-style decoder block written by a user from levers' general ops
// alone (no kernel of its own, none of levers' transformer modules): RMSNorm,
// rotary embeddings in Hugging Face's layout, grouped-query attention with a
// causal mask, and a SwiGLU MLP. Parameter names follow Hugging Face's
// LlamaDecoderLayer, so weights carry over by name.
#pragma once

#include <levers/nn/nn.hpp>

#include <cmath>
#include <limits>

namespace user {

using namespace levers;

struct LlamaBlockConfig {
    std::int64_t dim = 16, heads = 4, kv_heads = 2, hidden = 32;
    double rope_theta = 10000, eps = 1e-5;
    std::int64_t head_dim() const { return dim / heads; }
};

// x / √(mean(x²) + eps) · weight
struct RmsNorm : nn::Layer {
    nn::Parameter& weight;
    double eps;
    RmsNorm(Module& parent, std::string name, std::int64_t dim, double eps_)
        : weight(param("weight", {dim}, nn::init::ones())), eps(eps_) {
        parent.register_module(std::move(name), *this);
    }
    Tensor forward(const Tensor& x) override { return x * ops::rsqrt(ops::mean(ops::square(x), {-1}, true) + eps) * weight(); }
};

struct SelfAttention : nn::Module {
    nn::Linear q_proj, k_proj, v_proj, o_proj;
    LlamaBlockConfig c;
    SelfAttention(Module& parent, std::string name, const LlamaBlockConfig& config)
        : q_proj(*this, "q_proj", config.dim, config.heads * config.head_dim(), false),
          k_proj(*this, "k_proj", config.dim, config.kv_heads * config.head_dim(), false),
          v_proj(*this, "v_proj", config.dim, config.kv_heads * config.head_dim(), false),
          o_proj(*this, "o_proj", config.heads * config.head_dim(), config.dim, false),
          c(config) {
        parent.register_module(std::move(name), *this);
    }

    // x [B, H, T, D] rotated: pairs (i, i + D/2) by position · theta^(-2i/D).
    Tensor rope(const Tensor& x) const {
        const std::int64_t time = x.dim(2), d = c.head_dim(), half = d / 2;
        const Tensor pos = ops::arange(0, static_cast<double>(time), 1, x.dtype(), x.device()).unsqueeze(1);
        const Tensor i = ops::arange(0, static_cast<double>(half), 1, x.dtype(), x.device()).unsqueeze(0);
        const Tensor freq = ops::pow(c.rope_theta, i * (-2.0 / static_cast<double>(d)));  // [1, D/2]
        const Tensor angle = ops::cat({pos * freq, pos * freq}, -1);                        // [T, D]
        const Tensor rotated = ops::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
        return x * ops::cos(angle) + rotated * ops::sin(angle);
    }

    Tensor forward(const Tensor& x) {
        const std::int64_t b = x.dim(0), t = x.dim(1), d = c.head_dim();
        const Tensor q = rope(q_proj(x).view({b, t, c.heads, d}).transpose(1, 2));
        const Tensor k = rope(k_proj(x).view({b, t, c.kv_heads, d}).transpose(1, 2));
        const Tensor v = v_proj(x).view({b, t, c.kv_heads, d}).transpose(1, 2);
        // Each key-value head serves heads / kv_heads query heads.
        const Tensor keys = ops::repeat_interleave(k, c.heads / c.kv_heads, 1);
        const Tensor values = ops::repeat_interleave(v, c.heads / c.kv_heads, 1);
        const Tensor scores = ops::matmul(q, keys.mT()) / std::sqrt(static_cast<double>(d));
        const Tensor future = ops::triu(ops::ones_like(scores), 1) > 0.0;
        const Tensor weights = ops::softmax(ops::masked_fill(scores, future, -std::numeric_limits<double>::infinity()), -1);
        return o_proj(ops::matmul(weights, values).transpose(1, 2).reshape({b, t, c.heads * d}));
    }
};

struct SwiGlu : nn::Module {
    nn::Linear gate_proj, up_proj, down_proj;
    SwiGlu(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden)
        : gate_proj(*this, "gate_proj", dim, hidden, false),
          up_proj(*this, "up_proj", dim, hidden, false),
          down_proj(*this, "down_proj", hidden, dim, false) {
        parent.register_module(std::move(name), *this);
    }
    Tensor forward(const Tensor& x) { return down_proj(ops::silu(gate_proj(x)) * up_proj(x)); }
};

struct LlamaBlock : nn::Layer {
    RmsNorm input_layernorm;
    SelfAttention self_attn;
    RmsNorm post_attention_layernorm;
    SwiGlu mlp;
    LlamaBlock(const LlamaBlockConfig& c, std::uint64_t seed)
        : input_layernorm(*this, "input_layernorm", c.dim, c.eps),
          self_attn(*this, "self_attn", c),
          post_attention_layernorm(*this, "post_attention_layernorm", c.dim, c.eps),
          mlp(*this, "mlp", c.dim, c.hidden) {
        initialize(seed);
    }
    Tensor forward(const Tensor& x) override {
        const Tensor h = x + self_attn.forward(input_layernorm(x));
        return h + mlp.forward(post_attention_layernorm(h));
    }
};

}  // namespace user
