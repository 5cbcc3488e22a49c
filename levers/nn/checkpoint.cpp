#include "levers/nn/checkpoint.hpp"

#include <nlohmann/json.hpp>

#include "levers/core/autograd.hpp"
#include "levers/core/error.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/reduce.hpp"

namespace levers::nn {

namespace {

struct CheckpointState {
    autograd::SavedTensor x;
    std::function<std::pair<Tensor, Tensor>(const Tensor&)> fn;  // the side output undefined where there is none
    Module* block = nullptr;
    nlohmann::json dropout_before;  // the model's dropout counters as the forward began
};

// The block's trainable parameters as it computes with them (the compute copies a bf16 model uses).
void collect(Module& m, std::vector<Tensor>& out) {
    for (const auto& p : m.own_parameters())
        if (p->trainable()) out.push_back((*p)());
    for (const auto& [name, child] : m.children()) collect(*child, out);
}

void checkpoint_backward(autograd::Backward& b) {
    const auto& s = b.node().state<CheckpointState>();
    Module& root = s.block->root();
    const nlohmann::json dropout_now = root.save_state();
    root.load_state(s.dropout_before);  // the same masks as the forward drew
    Tensor x = s.x.get().detach();
    if (b.needs_grad(0)) x.requires_grad_();
    {
        autograd::RecomputeScope recompute;
        const auto [y, side] = s.fn(x);
        root.load_state(dropout_now);
        LEVERS_CHECK(y.shape() == b.grad_out(0).shape(),
                     "checkpoint: the block's recomputed output is {}, its forward gave {}", y.shape().str(),
                     b.grad_out(0).shape().str());
        if (!side.defined()) {
            y.backward(b.grad_out(0));  // the block's parameters' gradients land in their flat buffer
        } else {
            // Both outputs' gradients at once, through Σ y·dy + Σ side·dside (whose gradients are dy and dside).
            (ops::sum(ops::cast(y * b.grad_out(0), DType::f32)) +
             ops::sum(ops::cast(side * b.grad_out(1), DType::f32)))
                .backward();
        }
    }
    if (b.needs_grad(0)) b.set_grad(0, x.grad());
}

std::pair<Tensor, Tensor> checkpointed(Module& block, const Tensor& x,
                                       std::function<std::pair<Tensor, Tensor>(const Tensor&)> fn) {
    if (!autograd::grad_enabled() || !block.training()) return fn(x);
    std::vector<Tensor> params;
    collect(block, params);
    nlohmann::json dropout_before = block.root().save_state();
    Tensor y, side;
    {
        autograd::InferenceMode no_graph;  // the activations are freed as the block goes
        std::tie(y, side) = fn(x);
    }
    autograd::Node* n = side.defined()
                            ? autograd::record_using("checkpoint", &checkpoint_backward, {&x}, {&y, &side}, params)
                            : autograd::record_using("checkpoint", &checkpoint_backward, {&x}, {&y}, params);
    if (!n) return {y, side};  // nothing in it needs a gradient
    auto* s = n->make_state<CheckpointState>();
    s->x = x;
    s->fn = std::move(fn);
    s->block = &block;
    s->dropout_before = std::move(dropout_before);
    return {y, side};
}

}  // namespace

Tensor checkpoint(Module& block, const Tensor& x, std::function<Tensor(const Tensor&)> fn) {
    return checkpointed(block, x, [fn = std::move(fn)](const Tensor& in) { return std::pair{fn(in), Tensor()}; })
        .first;
}

std::pair<Tensor, Tensor> checkpoint_with_side(Module& block, const Tensor& x,
                                               std::function<std::pair<Tensor, Tensor>(const Tensor&)> fn) {
    return checkpointed(block, x, std::move(fn));
}

}  // namespace levers::nn
