// A language model's head and loss in one op: logits = x · weightᵀ (a tied
// embedding as weight, no bias), then their mean cross-entropy against the
// targets. The logits live inside the op only, so backward overwrites them
// with their own gradient (no second [rows, vocabulary] buffer), and on a
// card their rows are padded to a multiple of 64 so bf16 products stay
// aligned with a vocabulary like GPT-2's 50257. Made of the linear and
// cross-entropy kernels: no kernel of its own.
#pragma once

#include "kernels/cross_entropy.hpp"
#include "kernels/linear.hpp"

namespace levers::ops {

// x [..., C], weight [V, C], targets one i32 per row of x; a one-element loss
// in the accumulator dtype; differentiable in x and weight.
inline Tensor linear_cross_entropy(const Tensor& x, const Tensor& weight, const Tensor& targets,
                                   std::int64_t ignore_index = -100) {
    (void)linear_shape("linear_cross_entropy", x, weight, Tensor());
    const std::int64_t rows = x.shape().rows(), vocab = weight.dim(0);
    const Tensor t = targets_beside("linear_cross_entropy", targets, x, rows, vocab, ignore_index);
    const std::int64_t width = x.device().is_cpu() ? vocab : (vocab + 63) / 64 * 64;
    Tensor logits = Tensor::empty({rows, width}, x.dtype(), x.device());
    linear_into(logits, x, weight, Tensor(), width);
    Tensor loss = Tensor::empty({1}, accumulator(x.dtype()), x.device());
    Tensor lse = Tensor::empty({rows}, accumulator(x.dtype()), x.device());
    cross_entropy_into(loss, lse, logits, t, ignore_index, vocab);
    if (auto* node = autograd::record(
            "linear_cross_entropy",
            [](autograd::Backward& g) {
                const Tensor &x = g.saved(0), &weight = g.saved(1), &logits = g.saved(3);
                const std::int64_t vocab = weight.dim(0), width = logits.dim(1);
                // In place: the logits become their gradient.
                cross_entropy_backward_into(logits, g.saved(4), logits, g.saved(2), g.grad_out_scalar(), g.attr_int(0),
                                            vocab);
                const Tensor d_x = g.needs_grad(0) ? g.write_grad(0) : Tensor();
                const Tensor d_w = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                linear_backward_into(d_x, d_w, Tensor(), logits, x, weight, width);
            },
            {&x, &weight}, {&loss})) {
        node->save(0, x);
        node->save(1, weight);
        node->save(2, t);
        node->save(3, logits);
        node->save(4, lse);
        node->ints[0] = ignore_index;
    }
    return loss;
}

}  // namespace levers::ops
