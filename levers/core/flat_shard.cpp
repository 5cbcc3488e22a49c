#include "levers/core/flat_shard.hpp"

#include "levers/core/error.hpp"

namespace levers {

namespace {
// Calls copy(whole's range, part's run) for each range, the part's runs one after another.
template <class Copy> void each_range(const FlatShard& shard, const Tensor& part, const Tensor& whole, Copy copy) {
    LEVERS_CHECK(part.numel() == shard.size(), "a shard of {} elements given {} of them", shard.size(), part.numel());
    std::int64_t at = 0;
    for (const auto& [b, e] : shard.ranges) {
        LEVERS_CHECK(0 <= b && b <= e && e <= whole.numel(), "shard range [{}, {}) outside {} elements", b, e,
                     whole.numel());
        copy(whole.slice(b, e), part.slice(at, at + (e - b)));
        at += e - b;
    }
}
}  // namespace

void shard_to_whole(const FlatShard& shard, const Tensor& part, const Tensor& whole) {
    each_range(shard, part, whole, [](const Tensor& w, const Tensor& p) {
        if (w.dtype() == p.dtype())
            w.copy_from(p);
        else
            w.convert_from(p);  // ZeRO's f32 master values into their bf16 compute copy
    });
}

void whole_to_shard(const FlatShard& shard, const Tensor& whole, const Tensor& part) {
    each_range(shard, part, whole, [](const Tensor& w, const Tensor& p) { p.copy_from(w); });
}

}  // namespace levers
