// The gated MLP of Llama-family transformers (SwiGLU, Shazeer 2020):
// down_proj(silu(gate_proj(x)) · up_proj(x)), names as Hugging Face's.
#pragma once

#include "levers/nn/layers.hpp"

namespace levers::nn {

class GatedMLP : public Layer {
public:
    GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias = false, Init init = init::fan_in_uniform());
    GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias = false,
             Init init = init::fan_in_uniform());
    Tensor forward(const Tensor& x) override;
    Linear gate_proj, up_proj, down_proj;
};

}  // namespace levers::nn
