// The batcher any recipe's data uses: ranks share each global batch, epochs
// visit every item once, and a saved position resumes the same draws.
#include "levers/core/error.hpp"
#include "levers/data/batcher.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

using namespace levers;
using data::Batcher;

TEST_CASE("batcher: two ranks of batch b see exactly one rank of batch 2b, split in rank order") {
    for (const auto order : {Batcher::Order::epochs, Batcher::Order::random}) {
        Batcher one(50, 8, 7, order, 1, 0), r0(50, 4, 7, order, 2, 0), r1(50, 4, 7, order, 2, 1);
        for (int step = 0; step < 20; ++step) {
            const auto all = one.next();
            const auto a = r0.next(), b = r1.next();
            CHECK(std::equal(a.begin(), a.end(), all.begin()));
            CHECK(std::equal(b.begin(), b.end(), all.begin() + 4));
        }
    }
}

TEST_CASE("batcher: an epoch visits every item once, the next one in another order") {
    Batcher b(12, 4, 1, Batcher::Order::epochs, 1, 0);
    std::vector<std::int64_t> first, second;
    for (int s = 0; s < 3; ++s) for (auto i : b.next()) first.push_back(i);
    CHECK(b.epoch() == 1);
    for (int s = 0; s < 3; ++s) for (auto i : b.next()) second.push_back(i);
    CHECK(std::set<std::int64_t>(first.begin(), first.end()).size() == 12);
    CHECK(std::set<std::int64_t>(second.begin(), second.end()).size() == 12);
    CHECK(first != second);
}

TEST_CASE("batcher: a saved position resumes exactly, mid-epoch and across epochs; bad states are refused") {
    for (const auto order : {Batcher::Order::epochs, Batcher::Order::random}) {
        Batcher a(10, 3, 5, order, 1, 0);
        for (int s = 0; s < 5; ++s) a.next();
        const nlohmann::json saved = a.save_state();
        Batcher b(10, 3, 5, order, 1, 0);
        b.load_state(saved);
        for (int s = 0; s < 9; ++s) CHECK(a.next() == b.next());
    }
    Batcher e(10, 3, 5, Batcher::Order::epochs, 1, 0);
    Batcher r(10, 3, 5, Batcher::Order::random, 1, 0);
    CHECK_THROWS_WITH_AS(e.load_state(r.save_state()), doctest::Contains("drawing random, this one draws epochs"),
                         Error);
    CHECK_THROWS_WITH_AS(e.load_state({{"order", "epochs"}}), doctest::Contains("incomplete"), Error);
    CHECK_THROWS_WITH_AS(Batcher(0, 3, 1, Batcher::Order::epochs, 1, 0), doctest::Contains("at least one item"), Error);
    CHECK_THROWS_WITH_AS(Batcher(5, 0, 1, Batcher::Order::epochs, 1, 0), doctest::Contains("batch_size must be >= 1"),
                         Error);
}
