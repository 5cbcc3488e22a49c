// The evaluation of a language model on a token stream, shared by ranks.
#pragma once

#include "levers/data/text_corpus.hpp"
#include "levers/nn/module.hpp"

#include <functional>

namespace levers::train {

// Mean loss over the non-overlapping windows of `tokens` (all of them when
// max_batches <= 0, else max_batches x batch spread evenly), `model` in
// evaluation and inference mode; `mean_loss` gives one batch's mean over
// its tokens. Collective: each rank takes a contiguous share of the windows
// and the sums are combined, so every window counts exactly once whatever
// the rank count.
double mean_window_loss(nn::Module& model, const data::TokenFile& tokens, std::int64_t batch, std::int64_t time,
                        long max_batches, const std::function<double(const data::TokenBatch&)>& mean_loss);

// The same for a language model whose Tensor loss(inputs, targets) is that mean (models::Gpt).
template <class Model>
double mean_window_loss(Model& model, const data::TokenFile& tokens, std::int64_t batch, std::int64_t time,
                        long max_batches) {
    return mean_window_loss(model, tokens, batch, time, max_batches,
                            [&](const data::TokenBatch& b) { return model.loss(b.inputs, b.targets).item(); });
}

}  // namespace levers::train
