#include "levers/core/error.hpp"
#include "levers/launch/slot_ledger.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>

using namespace levers;
using namespace levers::launch;

TEST_CASE("the ledger hands out GPUs all at once or not at all, and takes them back") {
    testing::TempDir tmp;
    SlotLedger ledger(tmp.path(), Device::Kind::cuda, {0, 1, 2});
    auto two = ledger.try_acquire(2, "a");
    REQUIRE(two.has_value());
    CHECK(two->slots() == std::vector<int>{0, 1});
    CHECK_FALSE(ledger.try_acquire(2, "b").has_value());  // one free: no partial grant
    auto one = ledger.try_acquire(1, "c");
    REQUIRE(one.has_value());
    CHECK(one->slots() == std::vector<int>{2});
    auto holders = ledger.holders();
    REQUIRE(holders.size() == 3);
    CHECK(holders[0].job == "a");
    CHECK(holders[2].job == "c");
    two->release();
    CHECK(ledger.holders().size() == 1);
    auto again = ledger.try_acquire(2, "d");
    REQUIRE(again.has_value());
    CHECK(again->slots() == std::vector<int>{0, 1});
    CHECK_THROWS_WITH_AS(ledger.acquire(4, "e", false, [](const std::string&) {}),
                         doctest::Contains("needs 4 GPUs but this node has 3 usable"), Error);
    CHECK_THROWS_WITH_AS(ledger.acquire(1, "f", false, [](const std::string&) {}),
                         doctest::Contains("held by GPU 0: job 'd'"), Error);
}

TEST_CASE("CUDA_VISIBLE_DEVICES limits the GPUs, and a bad entry is named") {
    CHECK(visible_cuda_gpus(4, nullptr) == std::vector<int>{0, 1, 2, 3});
    CHECK(visible_cuda_gpus(4, "2,0") == std::vector<int>{2, 0});
    CHECK(visible_cuda_gpus(4, "").empty());
    CHECK_THROWS_WITH_AS(visible_cuda_gpus(2, "0,5"), doctest::Contains("entry '5' is not a GPU index of this node (0..1)"),
                         Error);
    CHECK_THROWS_WITH_AS(visible_cuda_gpus(2, "GPU-1234"), doctest::Contains("not UUIDs"), Error);
}
