// One training step of a language model as the benchmarks time it: the
// gradients zeroed, the loss of `tokens` against `targets`, backward, AdamW.
#pragma once

#include "levers/models/llama.hpp"
#include "levers/train/optimizer.hpp"

namespace levers::bench {

inline double lm_step(models::Llama& model, train::AdamW& opt, const Tensor& tokens, const Tensor& targets) {
    model.params().zero_grad();
    const Tensor loss = model.loss(tokens, targets);
    loss.backward();
    opt.step(1e-4);
    return loss.item();
}

}  // namespace levers::bench
