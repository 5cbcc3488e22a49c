#include "framework/dist/hierarchical_backend.hpp"

#include "framework/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace levers::dist {

namespace {
template <class T> void scale(void* data, std::int64_t n, int world) {
    T* p = static_cast<T*>(data);
    if constexpr (std::is_floating_point_v<T>) {
        const T s = T(1) / static_cast<T>(world);  // as the shared-memory group scales its sums
        for (std::int64_t i = 0; i < n; ++i) p[i] *= s;
    } else {
        for (std::int64_t i = 0; i < n; ++i) p[i] /= static_cast<T>(world);
    }
}
}  // namespace

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
    if (op != ReduceOp::mean) return;
    switch (dtype) {
        case DType::f32: return scale<float>(data, n, world_);
        case DType::f64: return scale<double>(data, n, world_);
        case DType::i32: return scale<std::int32_t>(data, n, world_);
        default: LEVERS_FAIL("rank {}: a mean over nodes of dtype {} is not supported on the CPU", rank_, name_of(dtype));
    }
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
    const std::size_t w = size_of(dtype);
    scratch_.assign(static_cast<const char*>(in), static_cast<const char*>(in) + static_cast<std::size_t>(n) * w);
    all_reduce(scratch_.data(), n, dtype, op);
    const auto [lo, hi] = chunk(n, world_, rank_);
    std::memcpy(out, scratch_.data() + static_cast<std::size_t>(lo) * w, static_cast<std::size_t>(hi - lo) * w);
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
