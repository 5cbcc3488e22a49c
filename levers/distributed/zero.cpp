#include "levers/distributed/zero.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"

#include <algorithm>

namespace levers::dist {

void check_zero_stage(int zero) {
    LEVERS_CHECK(zero >= 0 && zero <= 2, "zero must be 0 (data parallel), 1 or 2 (ZeRO stages), got {}", zero);
}

std::vector<std::pair<std::int64_t, std::int64_t>> gradient_buckets(std::int64_t n, std::int64_t bucket_elems) {
    const std::int64_t b = std::max<std::int64_t>(1, bucket_elems);
    std::vector<std::pair<std::int64_t, std::int64_t>> out;
    for (std::int64_t end = n; end > 0; end -= b) out.emplace_back(std::max<std::int64_t>(0, end - b), end);
    return out;
}

std::int64_t shard_bucket_elems(std::int64_t bucket_elems, int world) {
    const std::int64_t w = world;
    return std::max<std::int64_t>(1, (bucket_elems + w - 1) / w) * w;
}

FlatShard bucket_shard(std::int64_t n, std::int64_t bucket_elems, int world, int rank) {
    FlatShard s;
    for (const auto& [begin, end] : gradient_buckets(n, bucket_elems)) {
        const auto [lo, hi] = Backend::chunk(end - begin, world, rank);
        if (hi > lo) s.ranges.emplace_back(begin + lo, begin + hi);
    }
    std::reverse(s.ranges.begin(), s.ranges.end());  // buffer order
    return s;
}

namespace {
// The uneven bucket (the buffer's first) is gathered as a sum with zeros outside each rank's chunk, which is exact.
void zero_outside_chunks(const std::vector<std::pair<std::int64_t, std::int64_t>>& buckets, const Tensor& flat,
                         int world, int rank) {
    for (const auto& [begin, end] : buckets) {
        if ((end - begin) % world == 0) continue;
        const auto [lo, hi] = Backend::chunk(end - begin, world, rank);
        if (lo > 0) flat.slice(begin, begin + lo).zero();
        if (begin + hi < end) flat.slice(begin + hi, end).zero();
    }
}
}  // namespace

void gather_buckets(Backend& group, const Tensor& flat, std::int64_t bucket_elems) {
    const int world = group.world_size();
    const auto buckets = gradient_buckets(flat.numel(), bucket_elems);
    zero_outside_chunks(buckets, flat, world, group.rank());
    // A GPU's group runs on a stream of its own: the optimizer's update and those zeros must be done first.
    if (!flat.device().is_cpu()) device_synchronize();
    const auto width = static_cast<std::int64_t>(size_of(flat.dtype()));
    auto* base = static_cast<std::byte*>(flat.raw());
    for (const auto& [begin, end] : buckets) {
        const std::int64_t len = end - begin;
        if (len % world == 0)
            group.all_gather_in_place(base + begin * width, len / world, flat.dtype());
        else
            group.all_reduce(base + begin * width, len, flat.dtype(), ReduceOp::sum);
    }
}

std::vector<QueuedBucket> queue_gather_buckets(Backend& group, CollectiveQueue& queue, const Tensor& flat,
                                               std::int64_t bucket_elems) {
    const int world = group.world_size();
    auto buckets = gradient_buckets(flat.numel(), bucket_elems);
    zero_outside_chunks(buckets, flat, world, group.rank());  // a GPU's queue runs after the compute stream's work
    std::reverse(buckets.begin(), buckets.end());  // forward order
    const auto width = static_cast<std::int64_t>(size_of(flat.dtype()));
    auto* base = static_cast<std::byte*>(flat.raw());
    std::vector<QueuedBucket> out;
    for (const auto& [begin, end] : buckets) {
        const std::int64_t len = end - begin;
        const Work w = len % world == 0 ? queue.all_gather(base + begin * width, len / world, flat.dtype())
                                        : queue.all_reduce(base + begin * width, len, flat.dtype(), ReduceOp::sum);
        out.push_back({begin, end, w});
    }
    return out;
}

Tensor unshard(const Tensor& part, const FlatShard& shard, std::int64_t n) {
    if (shard.covers(n)) return part;
    LEVERS_CHECK(backend(), "a shard of {} of {} elements in a world of one", shard.size(), n);
    Tensor whole = Tensor::zeros({n}, part.dtype());
    shard_to_whole(shard, part, whole);
    backend()->all_reduce(whole.raw(), n, whole.dtype(), ReduceOp::sum);  // each element held by one rank
    return whole;
}

}  // namespace levers::dist
