// MLP classifier: linear → GELU → … → linear, trained with softmax
// cross-entropy. Parameters layers.0.weight, layers.0.bias, ...
#pragma once

#include "levers/nn/containers.hpp"
#include "levers/nn/layers.hpp"

#include <cstdint>
#include <vector>

namespace levers::models {

struct MlpConfig {
    int inputs = 784;
    std::vector<int> hidden = {256, 128};
    int classes = 10;

    void validate() const;  // throws levers::Error naming the bad field
};

class Mlp : public nn::Module {
public:
    // Weights U(-1/√fan_in, 1/√fan_in) like PyTorch's nn.Linear; zero biases.
    Mlp(const MlpConfig& config, std::uint64_t seed);

    // x [batch, inputs] (f32, on the host or the model's device) → logits
    // [batch, classes] on the model's device; differentiable.
    Tensor logits(const Tensor& x);
    // The mean cross-entropy of the logits against labels [batch] (i32).
    Tensor loss(const Tensor& x, const Tensor& labels);

    const MlpConfig& config() const { return config_; }
    nn::ModuleList<nn::Linear> layers;

private:
    MlpConfig config_;
};

}  // namespace levers::models
