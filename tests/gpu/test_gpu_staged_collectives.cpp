// Host collectives staged through a GPU group (what a job across nodes uses
// for losses, metrics and texts): a one-rank NCCL group on this machine's
// GPU, so every collective's result is known. Skipped where no GPU is.
#include "levers/core/gpu.hpp"
#include "levers/distributed/gpu_staged_backend.hpp"
#include "levers/distributed/nccl_backend.hpp"
#include "tests/gpu/no_gpu.hpp"

#include <doctest/doctest.h>

#include <map>
#include <numeric>
#include <vector>

using namespace levers;
using levers::testing::kNoGpu;


TEST_CASE("host buffers staged through a one-rank NCCL group come back as the collectives define" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    // One rank: a store that only remembers.
    struct MapStore final : dist::Store {
        std::map<std::string, std::string> kv;
        void set(const std::string& k, const std::string& v) override { kv[k] = v; }
        std::string get(const std::string& k) override { return kv.at(k); }
        std::int64_t add(const std::string& k, std::int64_t d) override {
            const std::int64_t n = (kv.count(k) ? std::stoll(kv[k]) : 0) + d;
            kv[k] = std::to_string(n);
            return n;
        }
    } store;
    dist::NcclBackend nccl(0, 1, 0, store, std::chrono::milliseconds(30000));
    dist::GpuStagedBackend host(nccl);
    CHECK(host.world_size() == 1);
    std::vector<double> values = {1.5, -2, 3};
    host.all_reduce(values.data(), 3, dist::ReduceOp::sum);  // one rank: a sum and a mean are the values
    CHECK(values == std::vector<double>{1.5, -2, 3});
    host.all_reduce(values.data(), 3, dist::ReduceOp::mean);
    CHECK(values == std::vector<double>{1.5, -2, 3});
    std::vector<float> in(1000), out(1000, 0.0f);
    std::iota(in.begin(), in.end(), 0.0f);
    host.all_gather(out.data(), in.data(), 1000);
    CHECK(out == in);
    char text[] = "a run directory";
    host.broadcast(text, sizeof text, 0);
    CHECK(std::string(text) == "a run directory");
    std::vector<float> mine(1000);
    host.reduce_scatter(mine.data(), in.data(), 1000, dist::ReduceOp::sum);
    CHECK(mine == in);
    host.barrier();
    host.all_reduce(values.data(), 0, dist::ReduceOp::sum);  // empty, still collective
}
