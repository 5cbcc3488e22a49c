#include "levers/nn/gated_mlp.hpp"

#include "levers/kernels/elementwise.hpp"

namespace levers::nn {

GatedMLP::GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias, Init init)
    : gate_proj(*this, "gate_proj", dim, hidden, bias, init),
      up_proj(*this, "up_proj", dim, hidden, bias, init),
      down_proj(*this, "down_proj", hidden, dim, bias, init) {}

GatedMLP::GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias, Init init)
    : GatedMLP(dim, hidden, bias, init) {
    parent.register_module(std::move(name), *this);
}

// SwiGLU in one elementwise pass (ops::swiglu = silu(gate) · up), its reference the two ops it replaces.
Tensor GatedMLP::forward(const Tensor& x) { return down_proj(ops::swiglu(gate_proj(x), up_proj(x))); }

}  // namespace levers::nn
