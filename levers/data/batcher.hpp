// Which items each rank trains on, step after step, for any data set of
// `items` items: each step takes a global batch of world x per_rank items
// and rank r takes the r-th slice of it, so N ranks of batch b see exactly
// what one rank of batch N x b would. The order is a fresh permutation each
// epoch (every item once per epoch), or independent draws with replacement;
// both come from one seed and are the same on every rank. save_state() and
// load_state() make a resumed run draw what an uninterrupted one would.
#pragma once

#include "levers/core/rng.hpp"

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <vector>

namespace levers::data {

class Batcher {
public:
    enum class Order { epochs, random };
    // `world` and `rank`: this rank's place among the ranks (the rank helpers'
    // dist::world_size() and dist::rank()).
    Batcher(std::int64_t items, std::int64_t per_rank, std::uint64_t seed, Order order, int world, int rank);

    // This rank's items for the next step (per_rank of them).
    const std::vector<std::int64_t>& next();
    std::int64_t epoch() const { return epoch_; }
    std::int64_t items() const { return items_; }
    std::int64_t per_rank() const { return per_rank_; }

    nlohmann::json save_state() const;
    // Throws levers::Error if `state` is not one of this batcher's.
    void load_state(const nlohmann::json& state);

private:
    void next_epoch();
    std::int64_t items_, per_rank_;
    Order order_;
    int world_, rank_;
    Rng rng_;
    std::string epoch_rng_;  // the generator's state as the current epoch's order was drawn ("" before the first)
    std::vector<std::int64_t> permutation_;
    std::size_t cursor_ = 0;
    std::int64_t epoch_ = 0;
    std::vector<std::int64_t> mine_;
};

}  // namespace levers::data
