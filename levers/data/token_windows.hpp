// Windows of a token stream for language-model training across ranks.
#pragma once

#include "levers/data/batcher.hpp"
#include "levers/data/text_corpus.hpp"

namespace levers::data {

// Windows of `time` tokens (and their next tokens) at random starts, the
// global batch split over `world` ranks by Batcher (so N ranks of batch b
// follow exactly the data order of one rank of batch N*b), resumable.
class TokenWindows {
public:
    TokenWindows(TokenFile tokens, std::int64_t per_rank, std::int64_t time, std::uint64_t seed, int world, int rank);
    TokenBatch next();  // this rank's batch of the next step
    nlohmann::json save_state() const;
    void load_state(const nlohmann::json& j);
    std::int64_t batch() const { return batcher_.per_rank(); }
    std::int64_t time() const { return time_; }

private:
    TokenFile tokens_;
    std::int64_t time_;
    Batcher batcher_;
};

}  // namespace levers::data
