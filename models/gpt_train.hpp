// What GPT recipes share for training on a token stream across ranks.
#pragma once

#include "framework/data/batcher.hpp"
#include "framework/data/text_corpus.hpp"
#include "models/gpt.hpp"

namespace levers::models {

// Windows of `time` tokens (and their next tokens) at random starts, the
// global batch split over ranks by data::Batcher (so N ranks of batch b
// follow exactly the data order of one rank of batch N*b), resumable.
class TokenWindows {
public:
    TokenWindows(data::TokenFile tokens, std::int64_t per_rank, std::int64_t time, std::uint64_t seed);
    data::TokenBatch next();  // this rank's batch of the next step
    nlohmann::json save_state() const { return batcher_.save_state(); }
    void load_state(const nlohmann::json& j) { batcher_.load_state(j); }
    std::int64_t batch() const { return batcher_.per_rank(); }
    std::int64_t time() const { return time_; }

private:
    data::TokenFile tokens_;
    std::int64_t time_;
    data::Batcher batcher_;
};

// Mean loss over the non-overlapping windows of `tokens` (all of them when
// max_batches <= 0, else max_batches x batch spread evenly), in inference
// mode. Collective: each rank takes a contiguous share of the windows and
// the sums are combined, so every window counts exactly once whatever the
// rank count.
double mean_loss(Gpt& model, const data::TokenFile& tokens, std::int64_t batch, std::int64_t time, long max_batches);

}  // namespace levers::models
