// Fused ops of a linear layer and GELU, what an MLP block is made of. On
// cards in bf16 their products carry GELU in cuBLASLt epilogues (no separate
// pass over the 4C-wide activations); elsewhere they run the linear and GELU
// kernels one after the other: the same results.
//
// Kernel "linear_gelu": t0 out = gelu(pre), t1 pre = in · weightᵀ + bias
// (kept for backward), t2 in, t3 weight, t4 bias (optional).
// Kernel "gelu_linear_backward", the backward of a layer whose input is
// gelu(pre): t0 d_pre (written: the gradient at GELU's input), t1 d_weight,
// t2 d_bias (optional, added to), t3 d_out, t4 in (= gelu(pre)), t5 pre,
// t6 weight.
#pragma once

#include "kernels/gelu.hpp"
#include "kernels/linear.hpp"

namespace levers::ops {

inline void linear_gelu_into(const Tensor& out, const Tensor& pre, const Tensor& in, const Tensor& weight,
                             const Tensor& bias) {
    static KernelSlot& kernel = kernel_slot("linear_gelu");
    KernelCall call = call_of(out, pre, in, weight, bias);
    run(kernel, in, call);
}

inline void gelu_linear_backward_into(const Tensor& d_pre, const Tensor& d_weight, const Tensor& d_bias,
                                      const Tensor& d_out, const Tensor& in, const Tensor& pre, const Tensor& weight) {
    static KernelSlot& kernel = kernel_slot("gelu_linear_backward");
    KernelCall call = call_of(d_pre, d_weight, d_bias, d_out, in, pre, weight);
    run(kernel, in, call);
}

// gelu(in · weightᵀ + bias); differentiable.
inline Tensor linear_gelu(const Tensor& in, const Tensor& weight, const Tensor& bias = Tensor()) {
    const Shape shape = linear_shape("linear_gelu", in, weight, bias);
    Tensor out = Tensor::empty(shape, in.dtype(), in.device());
    Tensor pre = Tensor::empty(shape, in.dtype(), in.device());
    linear_gelu_into(out, pre, in, weight, bias);
    if (auto* node = autograd::record(
            "linear_gelu",
            [](autograd::Backward& g) {
                const Tensor& pre = g.saved(2);
                Tensor d_pre = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
                gelu_backward_into(d_pre, g.grad_out(), pre);
                linear_grads(g, 0, d_pre, g.saved(0), g.saved(1));
            },
            {&in, &weight, &bias}, {&out})) {
        node->save(0, in);
        node->save(1, weight);
        node->save(2, pre);
    }
    return out;
}

// A transformer's MLP: linear(gelu(linear(in, fc_weight, fc_bias)), proj_weight,
// proj_bias), with GELU fused into both products on cards (forward and
// backward); differentiable.
inline Tensor gelu_mlp(const Tensor& in, const Tensor& fc_weight, const Tensor& fc_bias, const Tensor& proj_weight,
                       const Tensor& proj_bias) {
    const Shape hidden = linear_shape("gelu_mlp", in, fc_weight, fc_bias);
    Tensor h = Tensor::empty(hidden, in.dtype(), in.device());
    Tensor pre = Tensor::empty(hidden, in.dtype(), in.device());
    linear_gelu_into(h, pre, in, fc_weight, fc_bias);
    Tensor out = Tensor::empty(linear_shape("gelu_mlp", h, proj_weight, proj_bias), in.dtype(), in.device());
    linear_into(out, h, proj_weight, proj_bias);
    if (auto* node = autograd::record(
            "gelu_mlp",
            [](autograd::Backward& g) {
                const Tensor &x = g.saved(0), &pre = g.saved(1), &h = g.saved(2);
                Tensor d_pre = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
                const Tensor d_w = g.needs_grad(3) ? g.add_grad(3) : Tensor();
                const Tensor d_b = g.needs_grad(4) ? g.add_grad(4) : Tensor();
                gelu_linear_backward_into(d_pre, d_w, d_b, g.grad_out(), h, pre, g.saved(4));
                linear_grads(g, 0, d_pre, x, g.saved(3));
            },
            {&in, &fc_weight, &fc_bias, &proj_weight, &proj_bias}, {&out})) {
        node->save(0, in);
        node->save(1, pre);
        node->save(2, h);
        node->save(3, fc_weight);
        node->save(4, proj_weight);
    }
    return out;
}

}  // namespace levers::ops
