// What can be checked of the GPU-staged host group without a GPU: it
// refuses a group that does not work on GPU memory (tests/gpu has the rest).
#include "levers/core/error.hpp"
#include "levers/distributed/gpu_staged_backend.hpp"

#include <doctest/doctest.h>

using namespace levers;

TEST_CASE("host collectives staged through the GPU need a GPU group, and say so") {
    struct HostOnly final : dist::Backend {
        int rank() const override { return 0; }
        int world_size() const override { return 1; }
        std::string name() const override { return "shared memory"; }
        void barrier() override {}
        void all_reduce(void*, std::int64_t, DType, dist::ReduceOp) override {}
        void broadcast(void*, std::size_t, int) override {}
        void all_gather(void*, const void*, std::int64_t, DType) override {}
        void reduce_scatter(void*, const void*, std::int64_t, DType, dist::ReduceOp) override {}
        void abort(const std::string&) override {}
        Timing timing() const override { return {}; }
    } host_only;
    CHECK_THROWS_WITH_AS(dist::GpuStagedBackend{host_only},
                         doctest::Contains("need a GPU group, not shared memory"), Error);
}
