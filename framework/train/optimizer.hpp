// AdamW over a ParamSet: moment buffers as flat as the parameters and where
// they live (the CPU or the card), weight decay only where the parameter asks
// for it (matrices and embeddings, not biases or layernorm gains). The update
// is the backends' "adamw" kernel (kernels/adamw.hpp): one pass over the flat
// buffers, in f32 (or f64) master values whatever the gradients' dtype.
#pragma once

#include "framework/core/params.hpp"
#include "kernels/adamw.hpp"

namespace levers::train {

class AdamW {
public:
    AdamW(ParamSet& params, const kernels::AdamWHyper& hyper);

    // One update with learning rate `lr` from the gradients in params.grads().
    // Throws levers::Error if the parameters were laid out again since
    // (adapters attached, layers frozen, the model moved).
    void step(double lr);
    long steps_taken() const { return step_; }

    const Tensor& first_moment() const { return m_; }
    const Tensor& second_moment() const { return v_; }
    // Continues from saved moments after `steps` updates (resuming a run);
    // throws levers::Error if their sizes do not match the parameters.
    void load(const Tensor& m, const Tensor& v, long steps);

private:
    ParamSet& params_;
    kernels::AdamWHyper hyper_;
    Tensor m_, v_;
    Tensor chunks_;  // the kernel's chunk table, where the parameters are
    Tensor params_seen_;  // the flat buffer the moments belong to
    long step_ = 0;
};

}  // namespace levers::train
