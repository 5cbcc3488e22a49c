#include "levers/distributed/hierarchical_backend.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>

#include <cstring>

namespace levers::dist {

HierarchicalBackend::HierarchicalBackend(int node, int nodes, std::unique_ptr<Backend> local,
                                         std::unique_ptr<Backend> leaders)
    : node_(node), nodes_(nodes), local_world_(local->world_size()), local_(std::move(local)),
      leaders_(std::move(leaders)) {
    rank_ = node_ * local_world_ + local_->rank();
    world_ = nodes_ * local_world_;
    LEVERS_CHECK((local_->rank() == 0) == static_cast<bool>(leaders_),
                 "rank {}: only a node's local rank 0 joins the leaders' group", rank_);
}

std::string HierarchicalBackend::name() const {
    return fmt::format("shared memory within {} nodes, {} between them", nodes_,
                       leaders_ ? leaders_->name() : std::string("the network"));
}

std::string HierarchicalBackend::where() const {
    return fmt::format("node {} (ranks {}-{})", node_, node_ * local_world_, (node_ + 1) * local_world_ - 1);
}

template <class F> void HierarchicalBackend::on_local(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        LEVERS_FAIL("rank {} on {}: {}", rank_, where(), e.message());
    }
}

template <class F> void HierarchicalBackend::on_leaders(F&& f) {
    if (!leaders_) return;
    try {
        f();
    } catch (const Error& e) {
        // The node's other ranks wait for this one in their group: end their wait with the reason.
        local_->abort(fmt::format("the leaders' group between nodes failed on {}: {}", where(), e.message()));
        throw;
    }
}

void HierarchicalBackend::barrier() {
    on_local([&] { local_->barrier(); });
    on_leaders([&] { leaders_->barrier(); });
    on_local([&] { local_->barrier(); });
}

void HierarchicalBackend::all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) {
    on_local([&] { local_->all_reduce(data, n, dtype, ReduceOp::sum); });
    on_leaders([&] { leaders_->all_reduce(data, n, dtype, ReduceOp::sum); });
    on_local([&] { local_->broadcast(data, static_cast<std::size_t>(n) * size_of(dtype), 0); });
    if (op == ReduceOp::mean) sum_to_mean(data, n, dtype, world_);
}

void HierarchicalBackend::broadcast(void* data, std::size_t bytes, int root) {
    const int root_node = root / local_world_, root_local = root % local_world_;
    if (node_ == root_node) on_local([&] { local_->broadcast(data, bytes, root_local); });  // the leader has it
    on_leaders([&] { leaders_->broadcast(data, bytes, root_node); });
    if (node_ != root_node) on_local([&] { local_->broadcast(data, bytes, 0); });
}

void HierarchicalBackend::all_gather(void* out, const void* in, std::int64_t n, DType dtype) {
    const std::size_t block = static_cast<std::size_t>(n) * size_of(dtype) * static_cast<std::size_t>(local_world_);
    char* mine = static_cast<char*>(out) + static_cast<std::size_t>(node_) * block;
    on_local([&] { local_->all_gather(mine, in, n, dtype); });
    on_leaders([&] {
        scratch_.assign(mine, mine + block);  // Gloo's input may not alias its output
        leaders_->all_gather(out, scratch_.data(), n * local_world_, dtype);
    });
    on_local([&] { local_->broadcast(out, block * static_cast<std::size_t>(nodes_), 0); });
}

void HierarchicalBackend::reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) {
    reduce_scatter_by_all_reduce(out, in, n, dtype, op, scratch_);
}

void HierarchicalBackend::abort(const std::string& why) {
    local_->abort(why);
    if (leaders_) leaders_->abort(why);
}

Backend::Timing HierarchicalBackend::timing() const {
    Timing t = local_->timing();
    if (leaders_) {
        t.in_collectives += leaders_->timing().in_collectives;
        t.waiting += leaders_->timing().waiting;
    }
    return t;
}

}  // namespace levers::dist
