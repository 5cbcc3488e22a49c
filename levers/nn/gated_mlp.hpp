// The gated MLP of Llama-family transformers: down_proj(act(gate_proj(x)) ·
// up_proj(x)), names as Hugging Face's; act SiLU (SwiGLU, Shazeer 2020: the
// Llama family's) or GELU's tanh form (GeGLU: Gemma's gelu_pytorch_tanh).
// Fused (Phi-3's): one gate_up_proj makes the gate and the up halves side
// by side, as the checkpoint stores them (LoRA on it as PEFT puts it there).
#pragma once

#include "levers/nn/layers.hpp"

#include <memory>

namespace levers::nn {

// What a gated MLP's projections are called (not fused).
struct ProjectionNames {
    const char* gate = "gate_proj";
    const char* up = "up_proj";
    const char* down = "down_proj";
};

class GatedMLP : public Layer {
public:
    enum class Activation { silu, gelu_tanh };
    using Names = ProjectionNames;
    static constexpr Names kMixtralNames{"w1", "w3", "w2"};
    GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias = false, Init init = init::fan_in_uniform(),
             Activation activation = Activation::silu, bool fused = false, Names names = {});
    GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias = false,
             Init init = init::fan_in_uniform(), Activation activation = Activation::silu, bool fused = false,
             Names names = {});
    Tensor forward(const Tensor& x) override;
    // gate_proj and up_proj, or gate_up_proj alone (fused); registered in that order, then down_proj.
    std::unique_ptr<Linear> gate_proj, up_proj, gate_up_proj;
    Linear down_proj;
    const Activation activation;
};

}  // namespace levers::nn
