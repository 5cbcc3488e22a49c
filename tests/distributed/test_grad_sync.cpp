#include "levers/distributed/grad_sync.hpp"
#include "levers/distributed/zero.hpp"
#include "tests/distributed/run_ranks.hpp"

#include <cmath>

using namespace levers;
using namespace std::chrono_literals;

TEST_CASE_TEMPLATE("gradient buckets are averaged during 'backward' and all of them by finish(), step after step", T,
                   float, double) {
    for (std::int64_t bucket : {1, 7, 64, 1000}) {
        CAPTURE(bucket);
        auto ok = testing::run_ranks(3, 256, 10s, [&](dist::ShmBackend& b) {
            const std::int64_t n = 301;
            std::vector<T> grads(n);  // buckets are cut in elements of T, whatever its width
            dist::GradientSync sync(b, grads.data(), dtype_of<T>(), n, bucket);
            bool good = true;
            for (int step = 0; step < 3; ++step) {
                for (std::int64_t i = 0; i < n; ++i) grads[i] = static_cast<T>(3 * (b.rank() + step) + i % 5);
                // Backward finishes the buffer from its end, in uneven strides.
                for (std::int64_t from : {250, 249, 120, 7}) sync.ready_from(from);
                sync.finish();
                for (std::int64_t i = 0; i < n; ++i) good &= grads[i] == static_cast<T>(3 * (1 + step) + i % 5);
            }
            return good;
        });
        for (bool o : ok) CHECK(o);
    }
}

TEST_CASE("ZeRO-2's buckets: each rank keeps its shard only, the mean of every micro-batch's gradients added into it") {
    // Entries of 5, 40, 7, 64 and 3 elements (offsets 0, 16, 64, 80, 144: 147 in all) in buckets of 24 from the
    // end: the 40 and the 64 straddle buckets, so they get memory of their own and are copied in when final.
    auto ok = testing::run_ranks(3, 256, 10s, [&](dist::ShmBackend& b) {
        ParamSet params;
        for (std::int64_t n : {5, 40, 7, 64, 3}) params.add("p" + std::to_string(n), Shape{n}, true);
        params.allocate();
        const std::int64_t bucket = dist::shard_bucket_elems(24, 3);
        const FlatShard shard = dist::bucket_shard(params.size(), bucket, 3, b.rank());
        params.shard_grads(shard);
        dist::GradientSync sync(b, params, bucket);
        bool good = true;
        for (int micro = 0; micro < 2; ++micro) {
            for (int e = static_cast<int>(params.entries().size()) - 1; e >= 0; --e) {  // backward: from the end
                const auto& entry = params.entry(e);
                Tensor storage = sync.storage(e);
                Tensor g = storage.defined() ? storage : Tensor::zeros(entry.shape, DType::f32);
                for (std::int64_t i = 0; i < entry.shape.numel(); ++i)  // accumulated, as backward adds
                    g.data<float>()[i] += static_cast<float>((b.rank() + 1) * (micro + 1) + (entry.offset + i) % 7);
                sync.take(e, g);
                good &= !g.defined();  // the bucket holds it now
                sync.ready_from(entry.offset);
            }
            sync.finish();
        }
        good &= params.grads().numel() == shard.size();  // no whole buffer
        for (const auto& [lo, hi] : shard.ranges) {
            const Tensor mine = params.grad_slice(lo, hi);
            for (std::int64_t x = lo; x < hi; ++x) {
                bool in_entry = false;
                for (const auto& entry : params.entries())
                    in_entry |= x >= entry.offset && x < entry.offset + entry.shape.numel();
                // Mean over ranks of (r + 1)(m + 1) + x % 7, summed over m = 0, 1; the alignment gaps stay zero.
                const double expected = in_entry ? 6.0 + 2.0 * double(x % 7) : 0.0;
                good &= std::abs(double(mine.data<float>()[x - lo]) - expected) <= 1e-5 * (1 + expected);
            }
        }
        return good;
    });
    for (bool o : ok) CHECK(o);
}
