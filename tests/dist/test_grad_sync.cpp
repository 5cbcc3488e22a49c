#include "framework/dist/grad_sync.hpp"
#include "tests/dist/run_ranks.hpp"

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
