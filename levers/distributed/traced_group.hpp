// A process group that carries nothing: rank `rank` of `world`, every
// collective returning at once. The memory plan (levers/recipe/memory_plan.hpp)
// runs data parallelism's own bucket machinery over it while it traces a
// step on shapes alone, so a ZeRO-2 rank's gradient memory (its shard, the
// buckets backward fills and frees) is traced as the run makes it.
#pragma once

#include "levers/distributed/backend.hpp"

namespace levers::dist {

class TracedGroup final : public Backend {
public:
    TracedGroup(int rank, int world) : rank_(rank), world_(world) {}

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    std::string name() const override { return "a traced group"; }
    void barrier() override {}
    void all_reduce(void*, std::int64_t, DType, ReduceOp) override {}
    void broadcast(void*, std::size_t, int) override {}
    void all_gather(void*, const void*, std::int64_t, DType) override {}
    void reduce_scatter(void*, const void*, std::int64_t, DType, ReduceOp) override {}
    void all_gather_in_place(void*, std::int64_t, DType) override {}
    void abort(const std::string&) override {}
    Timing timing() const override { return {}; }

private:
    int rank_, world_;
};

}  // namespace levers::dist
