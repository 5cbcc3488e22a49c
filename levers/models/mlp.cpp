#include "levers/models/mlp.hpp"

#include "levers/kernels/cross_entropy.hpp"
#include "levers/kernels/linear_gelu.hpp"

namespace levers::models {

namespace {
const MlpConfig& checked(const MlpConfig& c) {
    c.validate();
    return c;
}
}  // namespace

void MlpConfig::validate() const {
    LEVERS_CHECK(inputs >= 1, "MLP inputs must be >= 1, got {}", inputs);
    LEVERS_CHECK(classes >= 2, "MLP classes must be >= 2, got {}", classes);
    for (int h : hidden) LEVERS_CHECK(h >= 1, "MLP hidden widths must be >= 1, got {}", h);
}

Mlp::Mlp(const MlpConfig& config, std::uint64_t seed) : layers(*this, "layers"), config_(checked(config)) {
    std::vector<int> widths{config_.inputs};
    widths.insert(widths.end(), config_.hidden.begin(), config_.hidden.end());
    widths.push_back(config_.classes);
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) layers.add(widths[l], widths[l + 1]);
    initialize(seed);
}

Tensor Mlp::logits(const Tensor& x) {
    LEVERS_CHECK(x.shape().ndim() == 2 && x.dim(0) >= 1 && x.dim(1) == config_.inputs,
                 "MLP forward needs x [batch >= 1, {}], got {}", config_.inputs, x.shape().str());
    Tensor h = on_device(x);
    for (std::size_t l = 0; l < layers.size(); ++l) {
        nn::Linear& layer = layers[l];
        const Tensor bias = layer.bias ? (*layer.bias)() : Tensor();
        h = l + 1 < layers.size() ? ops::linear_gelu(h, layer.weight(), bias) : layer(h);
    }
    return h;
}

Tensor Mlp::loss(const Tensor& x, const Tensor& labels) { return ops::cross_entropy(logits(x), labels); }

}  // namespace levers::models
