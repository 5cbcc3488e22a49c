// The MLP classifier's forward and backward on an NVIDIA card: what Mlp<float>
// runs once moved there (Mlp::to_device), with the model's own ParamSet on the
// card. Inputs and labels arrive on the host (f32) and are copied up each
// batch. In bf16 it computes on a bf16 copy of the weights (card_weights.hpp)
// with bf16 activations and gradients, every sum in f32. CUDA builds only.
#pragma once

#include "framework/core/dtype.hpp"
#include "framework/core/params.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace levers::models {

class MlpCard {
public:
    virtual ~MlpCard() = default;
    // x [batch, inputs] and labels [batch] on the host (batch checked by
    // Mlp::forward, the labels here). With labels: the mean
    // loss (waits for the card). Without: 0 (the logits are there for host_logits()).
    virtual float forward(const float* x, const std::int32_t* labels, std::int64_t batch) = 0;
    virtual void backward() = 0;  // adds into the gradients, announcing each finished layer
    // The logits of the last forward, copied from the card (as f32) when asked for.
    virtual const float* host_logits() const = 0;
};

// `widths`: inputs, hidden..., classes; ids of each layer's weight and bias in
// `params`, already on the current card with gradients in `compute` (f32 or bf16).
std::shared_ptr<MlpCard> make_mlp_card(std::vector<int> widths, std::vector<int> weight_ids, std::vector<int> bias_ids,
                                       ParamSet<float>& params, DType compute);

}  // namespace levers::models
