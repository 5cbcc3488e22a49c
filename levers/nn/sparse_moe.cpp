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
    // The routed rows sorted by expert: each one's token, and where each (token, choice) slot landed.
    const std::int32_t* c = choices_.data<std::int32_t>();
    tokens_per_expert_.assign(static_cast<std::size_t>(options.experts), 0);
    for (std::int64_t i = 0; i < n * k; ++i) ++tokens_per_expert_[static_cast<std::size_t>(c[i])];
    std::vector<std::int64_t> next(tokens_per_expert_.size(), 0);
    for (std::size_t e = 1; e < next.size(); ++e) next[e] = next[e - 1] + tokens_per_expert_[e - 1];
    std::vector<std::int32_t> token_of(static_cast<std::size_t>(n * k)), landed(token_of.size());
    for (std::int64_t i = 0; i < n * k; ++i) {
        const auto at = next[static_cast<std::size_t>(c[i])]++;
        token_of[static_cast<std::size_t>(at)] = static_cast<std::int32_t>(i / k);
        landed[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(at);
    }
    // One gather of every routed row; each expert a product over its run of them.
    const Tensor gathered = ops::index_select(h, 0, Tensor::from(token_of, {n * k}, x.device()));
    std::vector<Tensor> outputs;
    std::int64_t first = 0;
    for (std::size_t e = 0; e < tokens_per_expert_.size(); ++e) {
        const std::int64_t m = tokens_per_expert_[e];
        if (m > 0) outputs.push_back(experts[e](gathered.narrow(0, first, m)));
        first += m;
    }
    const Tensor routed = outputs.size() == 1 ? outputs.front() : ops::cat(outputs, 0);  // [n·k, dim], by expert
    // Back in slot order, weighted, each token's k summed.
    const Tensor by_slot = ops::index_select(routed, 0, Tensor::from(landed, {n * k}, x.device()));
    return ops::sum((by_slot * weights.unsqueeze(1)).view({n, k, dim}), {1}).reshape(x.shape());
}

}  // namespace levers::nn
