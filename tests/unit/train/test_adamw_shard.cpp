// AdamW over a shard of the flat buffer (ZeRO): the same update, element for
// element, as over the whole; moments saved whole load into any shard.
#include "levers/distributed/zero.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/train/param_kernels.hpp"

#include <doctest/doctest.h>

#include <cstring>

using namespace levers;

namespace {
// Two decaying matrices around a bias that does not decay: shards cut across them.
void fill(ParamSet& p) {
    p.add("w1", {7, 5}, true);
    p.add("b", {9}, false);
    p.add("w2", {4, 6}, true);
    p.allocate();
    for (std::int64_t i = 0; i < p.size(); ++i) {
        p.params().data<float>()[i] = 0.01f * static_cast<float>(i % 13) - 0.05f;
        p.grads().data<float>()[i] = 0.1f * static_cast<float>(i % 7) - 0.3f;
    }
}
bool bitwise_equal(const Tensor& a, const Tensor& b) {
    return a.bytes() == b.bytes() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}
}  // namespace

TEST_CASE("AdamW over each rank's shard updates every element exactly as over the whole buffer") {
    const kernels::AdamWHyper hyper{.lr = 0.01, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    ParamSet whole;
    fill(whole);
    train::AdamW all(whole, hyper);
    for (int s = 0; s < 3; ++s) all.step(0.01);

    const int world = 3;
    const std::int64_t bucket = dist::shard_bucket_elems(20, world);
    ParamSet sharded;
    fill(sharded);
    std::vector<train::AdamW> ranks;
    ranks.reserve(world);
    for (int r = 0; r < world; ++r) ranks.emplace_back(sharded, hyper, dist::bucket_shard(sharded.size(), bucket, world, r));
    for (int s = 0; s < 3; ++s)
        for (auto& o : ranks) o.step(0.01);
    CHECK(bitwise_equal(whole.params(), sharded.params()));
    std::int64_t state = 0;
    for (const auto& o : ranks) state += o.first_moment().numel();
    CHECK(state == sharded.size());  // each moment held once, by one rank

    // Whole moments load into a shard: each takes its ranges.
    train::AdamW resumed(sharded, hyper, dist::bucket_shard(sharded.size(), bucket, world, 1));
    resumed.load(all.first_moment(), all.second_moment(), 3);
    const auto& ranges = resumed.shard().ranges;
    std::int64_t at = 0;
    for (const auto& [b, e] : ranges) {
        CHECK(bitwise_equal(resumed.first_moment().slice(at, at + (e - b)), all.first_moment().slice(b, e)));
        CHECK(bitwise_equal(resumed.second_moment().slice(at, at + (e - b)), all.second_moment().slice(b, e)));
        at += e - b;
    }
    CHECK(resumed.steps_taken() == 3);
    CHECK_THROWS_AS(resumed.load(resumed.first_moment(), resumed.second_moment(), 3), Error);  // a shard, not the whole
}

TEST_CASE("the chunk table of a range counts from the range's start and keeps each entry's weight decay") {
    ParamSet p;
    fill(p);  // w1 decays, b does not, w2 decays (each entry aligned in the buffer)
    const auto &w1 = p.entry(0), &b = p.entry(1), &w2 = p.entry(2);
    const std::int64_t from = w1.offset + 35 - 5, to = w2.offset + 6;  // w1's last 5 to w2's first 6
    const auto chunks = train::adamw_chunks(p, from, to);
    REQUIRE(chunks.size() == 3);
    CHECK((chunks[0].start == 0 && chunks[0].count == 5 && chunks[0].decay == 1));
    CHECK((chunks[1].start == b.offset - from && chunks[1].count == 9 && chunks[1].decay == 0));
    CHECK((chunks[2].start == w2.offset - from && chunks[2].count == 6 && chunks[2].decay == 1));
}
