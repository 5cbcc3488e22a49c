#include "levers/nn/containers.hpp"

#include "levers/kernels/elementwise.hpp"

namespace levers::nn {

void Sequential::append(std::unique_ptr<Layer> layer) {
    LEVERS_CHECK(layer != nullptr, "Sequential '{}': append() of no layer", full_name());
    register_module(std::to_string(layers_.size()), *layer);
    layers_.push_back(std::move(layer));
}

Tensor Sequential::forward(const Tensor& x) {
    Tensor h = x;
    for (auto& layer : layers_) h = (*layer)(h);
    return h;
}

Tensor Residual::forward(const Tensor& x) { return x + Sequential::forward(x); }

}  // namespace levers::nn
