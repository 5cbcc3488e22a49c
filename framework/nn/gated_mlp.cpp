#include "framework/nn/gated_mlp.hpp"

#include "kernels/elementwise.hpp"

namespace levers::nn {

GatedMLP::GatedMLP(std::int64_t dim, std::int64_t hidden, bool bias)
    : gate_proj(*this, "gate_proj", dim, hidden, bias),
      up_proj(*this, "up_proj", dim, hidden, bias),
      down_proj(*this, "down_proj", hidden, dim, bias) {}

GatedMLP::GatedMLP(Module& parent, std::string name, std::int64_t dim, std::int64_t hidden, bool bias)
    : GatedMLP(dim, hidden, bias) {
    parent.register_module(std::move(name), *this);
}

Tensor GatedMLP::forward(const Tensor& x) { return down_proj(ops::silu(gate_proj(x)) * up_proj(x)); }

}  // namespace levers::nn
