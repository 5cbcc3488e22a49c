// Causal multi-head self-attention (GPT-2's): c_attn makes q, k and v from
// x [B, T, C] in one product, each head attends to the positions before it,
// c_proj mixes the heads. Runs the fused kernel (kernels/flash_attention.hpp)
// where it applies, the unfused op elsewhere.
#pragma once

#include "framework/nn/layers.hpp"

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

}  // namespace levers::nn
