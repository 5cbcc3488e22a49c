// A language model's head and loss in one op: logits = x · weightᵀ (a tied
// embedding as weight, no bias), then their mean cross-entropy against the
// targets. The logits live inside the op only, so backward overwrites them
// with their own gradient (no second [rows, vocabulary] buffer), and on a
// GPU their rows are padded to a multiple of 64 so bf16 products stay
// aligned with a vocabulary like GPT-2's 50257. Made of the linear and
// cross-entropy kernels: no kernel of its own.
#pragma once

#include "levers/kernels/cross_entropy.hpp"
#include "levers/kernels/linear.hpp"

#if !defined(__CUDACC__)
namespace levers::ops {

// x [..., C], weight [V, C], targets one i32 per row of x; a one-element loss
// in the accumulator dtype; differentiable in x and weight.
inline Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight_in, const Tensor& targets,
                                   std::int64_t ignore_index = -100) {
    const Tensor x = dense(x_in), weight = dense(weight_in);
    (void)linear_shape("linear_cross_entropy", x, weight, Tensor());
    const std::int64_t rows = x.shape().rows(), vocab = weight.dim(0);
    const Tensor t = targets_beside("linear_cross_entropy", targets, x, rows, vocab, ignore_index);
    const std::int64_t width = x.device().is_cpu() ? vocab : (vocab + 63) / 64 * 64;
    Tensor logits = Tensor::empty({rows, width}, x.dtype(), x.device());
    linear_into(logits, x, weight, Tensor(), width);
    Tensor loss = Tensor::empty({1}, accumulator(x.dtype()), x.device());
    Tensor lse = Tensor::empty({rows}, accumulator(x.dtype()), x.device());
    cross_entropy_into(loss, lse, logits, t, ignore_index, vocab);
    struct Saved {
        autograd::SavedTensor x, weight, targets, logits, lse;
        std::int64_t ignore_index;
    };
    if (auto* s = autograd::record<Saved>(
            "linear_cross_entropy",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor &x = s.x, &weight = s.weight, &logits = s.logits;
                const std::int64_t vocab = weight.dim(0), width = logits.dim(1);
                // In place: the logits become their gradient.
                cross_entropy_backward_into(logits, s.lse, logits, s.targets, g.grad_out_scalar(), s.ignore_index,
                                            vocab);
                const Tensor d_x = g.needs_grad(0) ? g.write_grad(0) : Tensor();
                const Tensor d_w = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                linear_backward_into(d_x, d_w, Tensor(), logits, x, weight, width);
            },
            {&x, &weight}, {&loss}))
        *s = {.x = x, .weight = weight, .targets = t, .logits = logits, .lse = lse, .ignore_index = ignore_index};
    return loss;
}

}  // namespace levers::ops
#endif  // !__CUDACC__
