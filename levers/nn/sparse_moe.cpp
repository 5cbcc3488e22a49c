#include "levers/nn/sparse_moe.hpp"

#include "levers/core/shape_trace.hpp"

#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/softmax.hpp"
#include "levers/kernels/topk.hpp"

namespace levers::nn {

namespace {
SparseMoe::Options checked(const SparseMoe::Options& o) {
    LEVERS_CHECK(o.dim >= 1 && o.hidden >= 1 && o.experts >= 1, "a mixture of experts of width {}, experts' hidden "
                 "size {} and {} experts; each must be at least 1", o.dim, o.hidden, o.experts);
    LEVERS_CHECK(o.top_k >= 1 && o.top_k <= o.experts, "num_experts_per_tok = {} of {} experts; give 1..{}", o.top_k,
                 o.experts, o.experts);
    return o;
}
}  // namespace

SparseMoe::SparseMoe(const Options& o)
    : gate(*this, "gate", checked(o).dim, o.experts, false, o.init), experts(*this, "experts"), options(o) {
    for (std::int64_t e = 0; e < o.experts; ++e) experts.add(o.dim, o.hidden, false, o.init, o.activation, false, o.names);
}

SparseMoe::SparseMoe(Module& parent, std::string name, const Options& o) : SparseMoe(o) {
    parent.register_module(std::move(name), *this);
}

bool is_router(const Linear& layer) {
    const auto* moe = dynamic_cast<const SparseMoe*>(layer.parent());
    return moe && &moe->gate == &layer;
}

Tensor SparseMoe::forward(const Tensor& x) {
    const std::int64_t dim = options.dim, k = options.top_k, n = x.numel() / dim;
    const Tensor h = x.reshape({n, dim});
    router_logits_ = gate(h);  // [n, experts]
    const Tensor probs = ops::softmax(ops::cast(router_logits_, ops::accumulator(x.dtype())), -1);
    auto [weights, chosen] = ops::topk(probs, k);  // [n, k] each
    if (options.norm_topk_prob) weights = weights / ops::sum(weights, {-1}, true);
    weights = ops::cast(weights, x.dtype()).reshape({n * k});
    // Which (token, slot) went to each expert, from the choices on the host.
    choices_ = chosen.to(Device::cpu()).contiguous();
    if (shape_tracing()) {  // a plan: the choices hold no values; the tokens spread evenly over the experts
        std::vector<std::int32_t> even(static_cast<std::size_t>(n * k));
        for (std::size_t i = 0; i < even.size(); ++i) even[i] = static_cast<std::int32_t>(i % static_cast<std::size_t>(options.experts));
        choices_ = Tensor::from(even, {n, k});
    }
    const std::int32_t* c = choices_.data<std::int32_t>();
    std::vector<std::vector<std::int32_t>> tokens(static_cast<std::size_t>(options.experts)), slots(tokens.size());
    for (std::int64_t i = 0; i < n * k; ++i) {
        tokens[static_cast<std::size_t>(c[i])].push_back(static_cast<std::int32_t>(i / k));
        slots[static_cast<std::size_t>(c[i])].push_back(static_cast<std::int32_t>(i));
    }
    tokens_per_expert_.assign(tokens.size(), 0);
    Tensor out = ops::zeros_like(h);
    for (std::size_t e = 0; e < tokens.size(); ++e) {
        const std::int64_t m = static_cast<std::int64_t>(tokens[e].size());
        tokens_per_expert_[e] = m;
        if (m == 0) continue;
        const Tensor rows = Tensor::from(tokens[e], {m}, x.device());
        const Tensor w = ops::index_select(weights, 0, Tensor::from(slots[e], {m}, x.device()));
        const Tensor y = experts[e](ops::index_select(h, 0, rows)) * w.unsqueeze(1);
        out = ops::scatter_add(out, 0, rows.unsqueeze(1).expand({m, dim}), y);
    }
    return out.reshape(x.shape());
}

}  // namespace levers::nn
