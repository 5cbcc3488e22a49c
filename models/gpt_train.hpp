// What GPT recipes share for training on a token stream across ranks.
#pragma once

#include "framework/core/rng.hpp"
#include "framework/data/text_corpus.hpp"
#include "models/gpt.hpp"

namespace levers::models {

// This rank's rows of a global batch of world x batch random windows. Every
// rank draws the same global batch from its copy of `rng`, so N ranks of batch
// b follow exactly the data order of one rank of batch N*b.
data::TokenBatch rank_batch(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time, Rng& rng);

// Mean loss over the non-overlapping windows of `tokens` (all of them when
// max_batches <= 0, else max_batches x batch spread evenly). Collective: each
// rank takes a contiguous share of the windows and the sums are combined, so
// every window counts exactly once whatever the rank count.
double mean_loss(Gpt<float>& model, const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time,
                 long max_batches);

}  // namespace levers::models
