// ZeRO stages 1 and 2 (Rajbhandari et al.) over the DDP buckets.
//
// A rank's shard is its chunk (Backend::chunk) of every gradient bucket, so
// the shard follows the buckets backward finishes: stage 2 reduce-scatters
// each bucket as DDP would all-reduce it, every rank's collective the same
// size, and the optimizer then updates this rank's chunk of each bucket.
// Buckets are a multiple of the world size (all but the first of the buffer,
// which takes the remainder), so gathering the updated parameters is one
// in-place all-gather per bucket.
#pragma once

#include "levers/core/flat_shard.hpp"
#include "levers/core/params.hpp"
#include "levers/distributed/backend.hpp"
#include "levers/distributed/collective_queue.hpp"

#include <cstdint>
#include <vector>

namespace levers::dist {

// Throws levers::Error unless `zero` is a stage levers runs: 0 (data parallel), 1 or 2.
void check_zero_stage(int zero);

// The buckets GradientSync cuts from n elements, [begin, end) from the end
// of the buffer backwards (the order backward finishes them).
std::vector<std::pair<std::int64_t, std::int64_t>> gradient_buckets(std::int64_t n, std::int64_t bucket_elems);
// A bucket size for sharding: at least one element per rank, rounded up to a multiple of the world.
std::int64_t shard_bucket_elems(std::int64_t bucket_elems, int world);
// This rank's chunk of every bucket, in buffer order.
FlatShard bucket_shard(std::int64_t n, std::int64_t bucket_elems, int world, int rank);

// Collective: every rank's chunk of each bucket of `flat` (the parameters,
// each rank having updated its own) copied to every rank, in place.
void gather_buckets(Backend& group, const Tensor& flat, std::int64_t bucket_elems);
// The same queued on `queue` (a queue of `group`), the buffer's start first
// (the order forward reads it): each bucket's [begin, end) and its Work.
struct QueuedBucket {
    std::int64_t begin = 0, end = 0;
    Work work;
};
std::vector<QueuedBucket> queue_gather_buckets(Backend& group, CollectiveQueue& queue, const Tensor& flat,
                                               std::int64_t bucket_elems);

// Collective: the whole flat tensor of n elements whose `shard` ranges this
// rank holds compactly in `part` (optimizer state), in host memory, on every
// rank. `part` itself when the shard is the whole.
Tensor unshard(const Tensor& part, const FlatShard& shard, std::int64_t n);

}  // namespace levers::dist
