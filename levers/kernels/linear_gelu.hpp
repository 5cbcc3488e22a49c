// Fused ops of a linear layer and GELU, what an MLP block is made of. On
// GPUs in bf16 their products carry GELU in cuBLASLt epilogues (no separate
// pass over the 4C-wide activations); elsewhere they run the linear and GELU
// kernels one after the other: the same results.
//
// The kernels read contiguous rows: the ops make their inputs so.
#pragma once

#include "levers/kernels/gelu.hpp"
#include "levers/kernels/linear.hpp"

namespace levers {

// "linear_gelu": out = gelu(pre), pre = in · weightᵀ + bias (bias optional; pre kept for backward).
struct LinearGeluCall : KernelCallBase {
    static constexpr const char* kName = "linear_gelu";
    TensorArg out, pre, in, weight, bias;
};
// "gelu_linear_backward", the backward of a layer whose input is gelu(pre):
// d_pre (written: the gradient at GELU's input), d_weight, d_bias (optional,
// added to); `in` = gelu(pre).
struct GeluLinearBackwardCall : KernelCallBase {
    static constexpr const char* kName = "gelu_linear_backward";
    TensorArg d_pre, d_weight, d_bias, d_out, in, pre, weight;
};

}  // namespace levers

#if !defined(__CUDACC__)
namespace levers::ops {

inline void linear_gelu_into(const Tensor& out, const Tensor& pre, const Tensor& in, const Tensor& weight,
                             const Tensor& bias) {
    LinearGeluCall call{.out = arg(out), .pre = arg(pre), .in = arg(in), .weight = arg(weight), .bias = arg(bias)};
    run(in, call);
}

inline void gelu_linear_backward_into(const Tensor& d_pre, const Tensor& d_weight, const Tensor& d_bias,
                                      const Tensor& d_out, const Tensor& in, const Tensor& pre, const Tensor& weight) {
    GeluLinearBackwardCall call{.d_pre = arg(d_pre), .d_weight = arg(d_weight), .d_bias = arg(d_bias),
                                .d_out = arg(d_out), .in = arg(in), .pre = arg(pre), .weight = arg(weight)};
    run(in, call);
}

// gelu(in · weightᵀ + bias); differentiable.
inline Tensor linear_gelu(const Tensor& input, const Tensor& weight_in, const Tensor& bias_in = Tensor()) {
    const Tensor in = dense(input), weight = dense(weight_in), bias = dense(bias_in);
    const Shape shape = linear_shape("linear_gelu", in, weight, bias);
    Tensor out = Tensor::empty(shape, in.dtype(), in.device());
    Tensor pre = Tensor::empty(shape, in.dtype(), in.device());
    linear_gelu_into(out, pre, in, weight, bias);
    struct Saved {
        autograd::SavedTensor in, weight, pre;
    };
    if (auto* s = autograd::record<Saved>(
            "linear_gelu",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor& pre = s.pre;
                Tensor d_pre = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
                gelu_backward_into(d_pre, g.grad_out(), pre);
                linear_grads(g, 0, d_pre, s.in, s.weight);
            },
            {&in, &weight, &bias}, {&out}))
        *s = {.in = in, .weight = weight, .pre = pre};
    return out;
}

// A transformer's MLP: linear(gelu(linear(in, fc_weight, fc_bias)), proj_weight,
// proj_bias), with GELU fused into both products on GPUs (forward and
// backward); differentiable.
inline Tensor gelu_mlp(const Tensor& input, const Tensor& fc_weight_in, const Tensor& fc_bias_in,
                       const Tensor& proj_weight_in, const Tensor& proj_bias_in) {
    const Tensor in = dense(input), fc_weight = dense(fc_weight_in), fc_bias = dense(fc_bias_in),
                 proj_weight = dense(proj_weight_in), proj_bias = dense(proj_bias_in);
    const Shape hidden = linear_shape("gelu_mlp", in, fc_weight, fc_bias);
    Tensor h = Tensor::empty(hidden, in.dtype(), in.device());
    Tensor pre = Tensor::empty(hidden, in.dtype(), in.device());
    linear_gelu_into(h, pre, in, fc_weight, fc_bias);
    Tensor out = Tensor::empty(linear_shape("gelu_mlp", h, proj_weight, proj_bias), in.dtype(), in.device());
    linear_into(out, h, proj_weight, proj_bias);
    struct Saved {
        autograd::SavedTensor in, pre, h, fc_weight, proj_weight;
    };
    if (auto* s = autograd::record<Saved>(
            "gelu_mlp",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor& pre = s.pre;
                Tensor d_pre = Tensor::empty(pre.shape(), pre.dtype(), pre.device());
                const Tensor d_w = g.needs_grad(3) ? g.add_grad(3) : Tensor();
                const Tensor d_b = g.needs_grad(4) ? g.add_grad(4) : Tensor();
                gelu_linear_backward_into(d_pre, d_w, d_b, g.grad_out(), s.h, pre, s.proj_weight);
                linear_grads(g, 0, d_pre, s.in, s.fc_weight);
            },
            {&in, &fc_weight, &fc_bias, &proj_weight, &proj_bias}, {&out}))
        *s = {.in = in, .pre = pre, .h = h, .fc_weight = fc_weight, .proj_weight = proj_weight};
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__
