// The gated MLP of Llama-family transformers: down_proj(act(gate_proj(x)) ·
// up_proj(x)), names as Hugging Face's; act SiLU (SwiGLU, Shazeer 2020: the
// Llama family's) or GELU's tanh form (GeGLU: Gemma's gelu_pytorch_tanh).
#pragma once

#include "levers/nn/layers.hpp"

namespace levers::nn {

class GatedMLP : public Layer {
public:
    enum class Activation { silu, gelu_tanh };
    GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias = false, Init init = init::fan_in_uniform(),
             Activation activation = Activation::silu);
    GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias = false,
             Init init = init::fan_in_uniform(), Activation activation = Activation::silu);
    Tensor forward(const Tensor& x) override;
    Linear gate_proj, up_proj, down_proj;
    const Activation activation;
};

}  // namespace levers::nn
