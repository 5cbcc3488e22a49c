#include "levers/data/token_windows.hpp"

#include <nlohmann/json.hpp>

namespace levers::data {

TokenWindows::TokenWindows(TokenFile tokens, std::int64_t per_rank, std::int64_t time, std::uint64_t seed, int world,
                           int rank)
    : tokens_(std::move(tokens)),
      time_(time),
      batcher_(window_starts(tokens_, time), per_rank, seed, Batcher::Order::random, world, rank) {}

TokenBatch TokenWindows::next() { return windows_at(tokens_, batcher_.next(), time_); }

nlohmann::json TokenWindows::save_state() const { return batcher_.save_state(); }
void TokenWindows::load_state(const nlohmann::json& j) { batcher_.load_state(j); }

}  // namespace levers::data
