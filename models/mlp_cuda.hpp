// The MLP classifier's forward and backward on an NVIDIA card: what Mlp<float>
// runs once moved there (Mlp::to_device), with the model's own ParamSet on the
// card. Inputs and labels arrive on the host and are copied up each batch.
// CUDA builds only.
#pragma once

#include "framework/core/device_memory.hpp"
#include "framework/core/params.hpp"
#include "models/mlp.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace levers::models {

class MlpCuda {
public:
    // `widths`: inputs, hidden..., classes; ids of each layer's weight and bias.
    MlpCuda(std::vector<int> widths, std::vector<int> weight_ids, std::vector<int> bias_ids, ParamSet<float>& params);

    // x [batch, inputs] and labels [batch] on the host. With labels: the mean
    // loss (waits for the card). Without: 0 (the logits are there for host_logits()).
    float forward(const float* x, const std::int32_t* labels, std::int64_t batch);
    void backward();  // adds into the gradients, announcing each finished layer
    // The logits of the last forward, copied from the card when asked for.
    const float* host_logits() const;

private:
    void ensure_activations(std::int64_t batch);

    std::vector<int> widths_, weight_ids_, bias_ids_;
    ParamSet<float>& params_;
    CarvedBlock block_;  // the activations, carved per batch size
    std::int64_t batch_ = 0;
    bool has_labels_ = false;
    float *x_ = nullptr, *logits_ = nullptr, *lse_ = nullptr, *loss_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr;
    std::int32_t* labels_ = nullptr;
    std::vector<float*> pre_, post_;  // per hidden layer: before and after GELU
    mutable std::vector<float> host_logits_;
};

}  // namespace levers::models
