// A sparse mixture of experts, as Mixtral's block_sparse_moe and Qwen3-MoE's
// mlp compute it: a router (`gate`, a Linear to one score per expert) scores
// each token; softmax over the experts in f32; each token goes to its top k
// experts, their probabilities renormalised to sum to 1 where
// norm_topk_prob; each expert a gated MLP over the tokens routed to it
// (every routed row gathered at once, sorted by expert: one product per
// expert over its run of rows, no token dropped), the outputs put back in
// (token, choice) order, weighted by the probabilities and summed over each
// token's choices. In a shape trace (a plan) the tokens spread evenly over
// the experts: the activations kept are the same for any routing (n·k rows in
// all), only the largest expert's transient product grows where it is uneven.
// Differentiable in the router (through the kept probabilities) and the
// experts; both reorderings are index_select, whose gradient is a scatter_add.
#pragma once

#include "levers/nn/containers.hpp"
#include "levers/nn/gated_mlp.hpp"

#include <cstdint>
#include <vector>

namespace levers::nn {

class SparseMoe : public Layer {
public:
    struct Options {
        std::int64_t dim = 0, hidden = 0, experts = 0, top_k = 2;
        bool norm_topk_prob = true;
        Init init = init::fan_in_uniform();
        GatedMLP::Activation activation = GatedMLP::Activation::silu;
        GatedMLP::Names names = {};  // the experts' projections (Mixtral's: GatedMLP::kMixtralNames)
    };
    explicit SparseMoe(const Options& options);
    SparseMoe(Module& parent, std::string name, const Options& options);
    // x [..., dim] -> [..., dim].
    Tensor forward(const Tensor& x) override;

    Linear gate;                    // the router: dim -> experts, no bias
    ModuleList<GatedMLP> experts;   // experts.0, experts.1, ...
    const Options options;

    // What the last forward routed: the router's scores [tokens, experts] (for the load-balancing loss),
    // each token's experts (i32 [tokens, top_k] on the host, the likeliest first) and how many tokens each
    // expert took.
    const Tensor& router_logits() const { return router_logits_; }
    const Tensor& choices() const { return choices_; }
    const std::vector<std::int64_t>& tokens_per_expert() const { return tokens_per_expert_; }

private:
    Tensor router_logits_, choices_;
    std::vector<std::int64_t> tokens_per_expert_;
};

// Whether `layer` is a mixture's router (its gate): LoRA's all-linear and the
// 4-bit base leave routers alone (they are small, and a fine-tune trains or
// freezes them whole).
bool is_router(const Linear& layer);

}  // namespace levers::nn
