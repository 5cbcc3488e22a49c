#include "levers/nn/gated_mlp.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/gelu.hpp"

namespace levers::nn {

GatedMLP::GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias, Init init, Activation activation_, bool fused,
                   Names names)
    : gate_proj(optional_linear(*this, !fused, names.gate, dim, hidden, bias, init)),
      up_proj(optional_linear(*this, !fused, names.up, dim, hidden, bias, init)),
      gate_up_proj(optional_linear(*this, fused, "gate_up_proj", dim, 2 * hidden, bias, init)),
      down_proj(*this, names.down, hidden, dim, bias, init),
      activation(activation_) {}

GatedMLP::GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias, Init init,
                   Activation activation_, bool fused, Names names)
    : GatedMLP(dim, hidden, bias, init, activation_, fused, names) {
    parent.register_module(std::move(name), *this);
}

// SwiGLU in one elementwise pass (ops::swiglu = silu(gate) · up), its reference the two ops it replaces.
Tensor GatedMLP::forward(const Tensor& x) {
    Tensor gate, up;
    if (gate_up_proj) {  // the gate's half first, as Phi-3's chunk(2) takes them
        const Tensor both = (*gate_up_proj)(x);
        const std::int64_t hidden = both.dim(-1) / 2;
        gate = both.narrow(-1, 0, hidden);
        up = both.narrow(-1, hidden, hidden);
    } else {
        gate = (*gate_proj)(x);
        up = (*up_proj)(x);
    }
    if (activation == Activation::gelu_tanh) return down_proj(ops::gelu(gate, ops::GeluForm::tanh) * up);
    return down_proj(ops::swiglu(gate, up));
}

}  // namespace levers::nn
