#include "levers/data/batcher.hpp"

#include <nlohmann/json.hpp>

#include "levers/core/error.hpp"

#include <numeric>

namespace levers::data {

Batcher::Batcher(std::int64_t items, std::int64_t per_rank, std::uint64_t seed, Order order, int world, int rank)
    : items_(items), per_rank_(per_rank), order_(order), world_(world), rank_(rank), rng_(seed) {
    LEVERS_CHECK(items >= 1, "a batcher needs at least one item, got {}", items);
    LEVERS_CHECK(per_rank >= 1, "batch_size must be >= 1, got {}", per_rank);
    LEVERS_CHECK(world >= 1 && rank >= 0 && rank < world, "rank {} of {} ranks", rank, world);
    if (order_ == Order::epochs) {
        permutation_.resize(static_cast<std::size_t>(items));
        cursor_ = permutation_.size();  // the first step draws the first epoch's order
    }
    mine_.resize(static_cast<std::size_t>(per_rank));
}

void Batcher::next_epoch() {
    epoch_rng_ = rng_.state();
    std::iota(permutation_.begin(), permutation_.end(), 0);
    for (std::size_t j = permutation_.size() - 1; j > 0; --j) std::swap(permutation_[j], permutation_[rng_.below(j + 1)]);
    cursor_ = 0;
    ++epoch_;
}

const std::vector<std::int64_t>& Batcher::next() {
    const std::int64_t first = rank_ * per_rank_;
    for (std::int64_t g = 0; g < per_rank_ * world_; ++g) {
        std::int64_t item;
        if (order_ == Order::random) {
            item = static_cast<std::int64_t>(rng_.below(static_cast<std::uint64_t>(items_)));
        } else {
            if (cursor_ == permutation_.size()) next_epoch();
            item = permutation_[cursor_++];
        }
        if (g >= first && g < first + per_rank_) mine_[static_cast<std::size_t>(g - first)] = item;
    }
    return mine_;
}

nlohmann::json Batcher::save_state() const {
    if (order_ == Order::random) return {{"order", "random"}, {"rng", rng_.state()}};
    return {{"order", "epochs"}, {"epoch_rng", epoch_rng_}, {"cursor", cursor_}, {"epoch", epoch_}};
}

void Batcher::load_state(const nlohmann::json& j) {
    try {
        const std::string order = j.at("order").get<std::string>();
        LEVERS_CHECK(order == (order_ == Order::random ? "random" : "epochs"),
                     "the saved data position is of a batcher drawing {}, this one draws {}", order,
                     order_ == Order::random ? "random" : "epochs");
        if (order_ == Order::random) return rng_.set_state(j.at("rng").get<std::string>());
        if (const auto s = j.at("epoch_rng").get<std::string>(); !s.empty()) {
            rng_.set_state(s);
            next_epoch();  // the same permutation again, from the generator as it was
        }
        cursor_ = j.at("cursor").get<std::size_t>();
        epoch_ = j.at("epoch").get<std::int64_t>();
        LEVERS_CHECK(cursor_ <= permutation_.size(), "the saved data position {} is past the {} items", cursor_,
                     permutation_.size());
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("the saved data position is incomplete: {}", e.what());
    }
}

}  // namespace levers::data
