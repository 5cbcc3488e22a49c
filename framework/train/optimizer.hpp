// AdamW over a ParamSet: moment buffers as flat as the parameters and where
// they live (the CPU or the card), weight decay only where the parameter asks
// for it (matrices and embeddings, not biases or layernorm gains).
#pragma once

#include "framework/core/params.hpp"
#include "kernels/adamw.hpp"

#include <cstddef>
#include <memory>

namespace levers::train {

template <class T> class AdamW {
public:
    AdamW(ParamSet<T>& params, const kernels::AdamWHyper& hyper);

    // One update with learning rate `lr` from the gradients in params.grads().
    void step(double lr);
    long steps_taken() const { return step_; }

    const Tensor& first_moment() const { return m_; }
    const Tensor& second_moment() const { return v_; }
    // Continues from saved moments after `steps` updates (resuming a run);
    // throws levers::Error if their sizes do not match the parameters.
    void load(const Tensor& m, const Tensor& v, long steps);

private:
    ParamSet<T>& params_;
    kernels::AdamWHyper hyper_;
    Tensor m_, v_;
    long step_ = 0;
    // On a card: the one-launch update's chunk table (param_kernels.hpp), in card memory.
    std::shared_ptr<std::byte> card_chunks_;
    std::int64_t n_chunks_ = 0;
};

extern template class AdamW<float>;
extern template class AdamW<double>;

}  // namespace levers::train
