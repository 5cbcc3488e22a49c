// ZeRO's pieces below the loop: the shards, reduce-scatter queued in place,
// the parameters gathered back, on real processes over shared memory.
#include "framework/dist/collective_queue.hpp"
#include "framework/dist/zero.hpp"
#include "tests/dist/run_ranks.hpp"

#include <set>

using namespace levers;
using namespace std::chrono_literals;

TEST_CASE("the ranks' shards of the buckets cover the buffer once, in buffer order") {
    for (int world : {1, 2, 3, 8}) {
        for (std::int64_t n : {1, 7, 301, 4096}) {
            const std::int64_t bucket = dist::shard_bucket_elems(50, world);
            CHECK(bucket % world == 0);
            std::vector<int> owners(static_cast<std::size_t>(n), 0);
            for (int r = 0; r < world; ++r) {
                const FlatShard s = dist::bucket_shard(n, bucket, world, r);
                std::int64_t last_end = 0;
                for (const auto& [b, e] : s.ranges) {
                    CHECK(b >= last_end);
                    CHECK(b < e);
                    last_end = e;
                    for (std::int64_t i = b; i < e; ++i) ++owners[static_cast<std::size_t>(i)];
                }
                // Nearly equal shares: at most one element per bucket apart.
                CHECK(std::abs(s.size() - n / world) <= static_cast<std::int64_t>(s.ranges.size()) + 1);
            }
            for (int o : owners) CHECK(o == 1);
        }
    }
    CHECK(FlatShard::whole(10).covers(10));
    CHECK(dist::gradient_buckets(10, 4) == std::vector<std::pair<std::int64_t, std::int64_t>>{{6, 10}, {2, 6}, {0, 2}});
}

TEST_CASE_TEMPLATE("a queued reduce-scatter leaves each rank the mean of its chunk; gathering sends every chunk to all",
                   T, float, double) {
    for (int world : {2, 3}) {
        CAPTURE(world);
        auto ok = testing::run_ranks(world, 64, 10s, [&](dist::ShmBackend& b) {
            const std::int64_t n = 301, bucket = dist::shard_bucket_elems(40, world);
            std::vector<T> grads(n);
            for (std::int64_t i = 0; i < n; ++i) grads[i] = static_cast<T>((b.rank() + 1) * (i % 7));
            auto queue = dist::make_thread_queue(b);
            dist::Work last;
            for (const auto& [begin, end] : dist::gradient_buckets(n, bucket))
                last = queue->reduce_scatter(grads.data() + begin, end - begin, dtype_of<T>(), dist::ReduceOp::mean);
            queue->wait(last);
            bool good = true;
            const T mean_factor = static_cast<T>(world + 1) / 2;  // mean of 1..world
            const FlatShard mine = dist::bucket_shard(n, bucket, world, b.rank());
            for (const auto& [lo, hi] : mine.ranges)
                for (std::int64_t i = lo; i < hi; ++i) good &= grads[i] == mean_factor * static_cast<T>(i % 7);

            // Each rank "updates" its shard to values only it would write; gathering gives everyone all of them.
            Tensor params = Tensor::zeros({n}, dtype_of<T>());
            for (const auto& [lo, hi] : mine.ranges)
                for (std::int64_t i = lo; i < hi; ++i) params.data<T>()[i] = static_cast<T>(1000 * b.rank() + i);
            dist::gather_buckets(b, params, bucket);
            for (int r = 0; r < world; ++r)
                for (const auto& [lo, hi] : dist::bucket_shard(n, bucket, world, r).ranges)
                    for (std::int64_t i = lo; i < hi; ++i) good &= params.data<T>()[i] == static_cast<T>(1000 * r + i);
            return good;
        });
        for (bool o : ok) CHECK(o);
    }
}
