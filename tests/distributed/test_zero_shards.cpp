// ZeRO's pieces below the loop: the shards, reduce-scatter queued in place,
// the parameters gathered back, on real processes over shared memory.
#include "levers/distributed/collective_queue.hpp"
#include "levers/distributed/data_parallel.hpp"
#include "levers/distributed/zero.hpp"
#include "tests/distributed/run_ranks.hpp"

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

TEST_CASE("ZeRO with a compute copy keeps its shard's master values only, gathers the copy while forward reads it, "
          "and ends whole") {
    // f64 master values computing in f32 (as f32 masters compute in bf16 on a GPU): ZeRO-1 and 2 on 3 ranks,
    // entries of 5, 40, 7, 64 and 3 elements in buckets of 24.
    for (int zero : {1, 2}) {
        CAPTURE(zero);
        auto ok = testing::run_ranks(3, 256, 10s, [&](dist::ShmBackend& b) {
            ParamSet params;
            for (std::int64_t n : {5, 40, 7, 64, 3}) params.add("p" + std::to_string(n), Shape{n}, true);
            params.allocate(DType::f64);
            params.to_device(Device::cpu(), DType::f32);
            const std::int64_t n = params.size();
            bool good = params.compute_dtype() == DType::f32;
            dist::ParamSync sync(params, 24 * 4, zero, &b);
            const FlatShard& shard = sync.shard();
            good &= params.sharded_params() != nullptr && params.params().numel() == shard.size() && shard.size() < n;
            try {
                (void)params.param_tensor(1);
                good = false;  // the whole values are not here to view
            } catch (const Error&) {
            }
            // Each rank "updates" its shard to values only it would write.
            for (const auto& [lo, hi] : shard.ranges) {
                const Tensor part = params.param_slice(lo, hi);
                for (std::int64_t i = lo; i < hi; ++i) part.data<double>()[i - lo] = 1000.0 * b.rank() + double(i);
            }
            params.changed();
            sync.gather_params();  // queued: the values arrive bucket by bucket, the buffer's start first
            std::vector<int> owner(static_cast<std::size_t>(n));
            for (int r = 0; r < 3; ++r)
                for (const auto& [lo, hi] : dist::bucket_shard(n, dist::shard_bucket_elems(24, 3), 3, r).ranges)
                    for (std::int64_t i = lo; i < hi; ++i) owner[static_cast<std::size_t>(i)] = r;
            params.ready(0);  // the first entry's bucket has arrived (forward's first parameter)
            const Tensor first = params.compute_tensor(0);
            for (std::int64_t i = 0; i < 5; ++i)
                good &= first.data<float>()[i] == static_cast<float>(1000 * owner[static_cast<std::size_t>(i)] + i);
            const Tensor& copy = params.compute();  // gathered, not converted from the shard
            for (std::int64_t i = 0; i < n; ++i)
                good &= copy.data<float>()[i] == static_cast<float>(1000 * owner[static_cast<std::size_t>(i)] + i);
            sync.end();
            good &= params.sharded_params() == nullptr && params.params().numel() == n;
            for (std::int64_t i = 0; i < n; ++i)
                good &= params.params().data<double>()[i] == 1000.0 * owner[static_cast<std::size_t>(i)] + double(i);
            good &= params.compute().data<float>()[n - 1] == static_cast<float>(1000 * owner.back() + n - 1);
            return good;
        });
        for (bool o : ok) CHECK(o);
    }
}
