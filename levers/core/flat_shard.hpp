// The part of a flat parameter buffer one rank owns under ZeRO: a list of
// [begin, end) element ranges, in buffer order. A rank's optimizer keeps
// state for these elements only, and its gradients there are the ones
// averaged for it; the whole buffer is one range.
#pragma once

#include "levers/core/tensor.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace levers {

struct FlatShard {
    std::vector<std::pair<std::int64_t, std::int64_t>> ranges;

    static FlatShard whole(std::int64_t n) { return n > 0 ? FlatShard{{{0, n}}} : FlatShard{}; }
    // Elements owned (the optimizer state's length).
    std::int64_t size() const {
        std::int64_t s = 0;
        for (const auto& [b, e] : ranges) s += e - b;
        return s;
    }
    bool covers(std::int64_t n) const { return size() == n; }
};

// Between a flat tensor of the whole buffer and a rank's compact part of it
// (size() elements, the ranges one after another), on any devices: the
// part's values put in their places (converted where the dtypes differ:
// one device), and taken from them.
void shard_to_whole(const FlatShard& shard, const Tensor& part, const Tensor& whole);
void whole_to_shard(const FlatShard& shard, const Tensor& whole, const Tensor& part);

}  // namespace levers
