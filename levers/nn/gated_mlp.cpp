#include "levers/nn/gated_mlp.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/gelu.hpp"

namespace levers::nn {

GatedMLP::GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias, Init init, Activation activation_)
    : gate_proj(*this, "gate_proj", dim, hidden, bias, init),
      up_proj(*this, "up_proj", dim, hidden, bias, init),
      down_proj(*this, "down_proj", hidden, dim, bias, init),
      activation(activation_) {}

GatedMLP::GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias, Init init,
                   Activation activation_)
    : GatedMLP(dim, hidden, bias, init, activation_) {
    parent.register_module(std::move(name), *this);
}

// SwiGLU in one elementwise pass (ops::swiglu = silu(gate) · up), its reference the two ops it replaces.
Tensor GatedMLP::forward(const Tensor& x) {
    if (activation == Activation::gelu_tanh)
        return down_proj(ops::gelu(gate_proj(x), ops::GeluForm::tanh) * up_proj(x));
    return down_proj(ops::swiglu(gate_proj(x), up_proj(x)));
}

}  // namespace levers::nn
