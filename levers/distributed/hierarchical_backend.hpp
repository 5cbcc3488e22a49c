// Host collectives of a job whose ranks span nodes: within each node through
// shared memory (ShmBackend), across nodes among one leader per node (its
// local rank 0) through a network group (Gloo). An all-reduce sums within the
// node, sums the nodes' sums among the leaders, and hands the total back
// within each node; so only one rank per node talks over the network, and it
// sends one node's worth of data, not each rank's.
//
// Ranks are numbered node by node (torchrun's and Slurm's block order): rank
// = node x local_world + local_rank. A failure in either group aborts the
// other, so every rank of every node learns of it.
#pragma once

#include "levers/distributed/backend.hpp"

#include <memory>
#include <string>
#include <vector>

namespace levers::dist {

class HierarchicalBackend final : public Backend {
public:
    // `local`: the node's group (local_world ranks); `leaders`: the leaders'
    // group (one rank per node), on local rank 0 only (null elsewhere).
    HierarchicalBackend(int node, int nodes, std::unique_ptr<Backend> local, std::unique_ptr<Backend> leaders);

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    std::string name() const override;

    using Backend::all_gather;
    using Backend::all_reduce;
    using Backend::reduce_scatter;
    void barrier() override;
    void all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override;
    void broadcast(void* data, std::size_t bytes, int root) override;
    void all_gather(void* out, const void* in, std::int64_t n, DType dtype) override;
    void reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) override;
    void abort(const std::string& why) override;
    Timing timing() const override;

private:
    template <class F> void on_local(F&& f);    // a failure names this node
    template <class F> void on_leaders(F&& f);  // a failure aborts this node's group too
    std::string where() const;                  // "node 1 (ranks 2-3)"

    int node_, nodes_, local_world_, rank_, world_;
    std::unique_ptr<Backend> local_, leaders_;
    std::vector<char> scratch_;
};

}  // namespace levers::dist
