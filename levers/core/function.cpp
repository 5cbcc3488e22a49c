#include "levers/core/function.hpp"

namespace levers::autograd {

void Context::save_one(const Tensor& t) {
    LEVERS_CHECK(count_ < kSaved, "{}: forward saves more than {} tensors", op_, kSaved);
    saved_[static_cast<std::size_t>(count_++)] = t;
}

const Tensor& Context::saved(int i) const {
    LEVERS_CHECK(0 <= i && i < count_, "{}: backward reads saved tensor {}, but forward saved {}", op_, i, count_);
    return saved_[static_cast<std::size_t>(i)];
}

namespace detail {

void hand_over(Backward& b, const char* op, const std::vector<Tensor>& grads) {
    int inputs = 0;
    for (int k = 0; k < b.node().n_in; ++k)
        if (b.node().in[static_cast<std::size_t>(k)].present) inputs = k + 1;
    LEVERS_CHECK(static_cast<int>(grads.size()) == inputs,
                 "{}: backward returned {} gradient{}, one per tensor argument ({}) is needed", op, grads.size(),
                 grads.size() == 1 ? "" : "s", inputs);
    for (int k = 0; k < inputs; ++k) {
        const Tensor& g = grads[static_cast<std::size_t>(k)];
        if (!g.defined() || !b.needs_grad(k)) continue;
        const Shape& want = b.input_shape(k);
        LEVERS_CHECK(g.shape() == want, "{}: backward returned a {} gradient for argument {} of shape {}", op,
                     g.shape().str(), k, want.str());
        const Edge& e = b.node().in[static_cast<std::size_t>(k)];
        LEVERS_CHECK(g.dtype() == e.dtype && g.device() == e.device,
                     "{}: backward returned a {} gradient on {} for argument {}, which is {} on {}", op,
                     name_of(g.dtype()), g.device().str(), k, name_of(e.dtype), e.device.str());
        b.pass_grad(k, g);
    }
}

}  // namespace detail
}  // namespace levers::autograd
