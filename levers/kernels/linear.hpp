// linear: out = in · weightᵀ + bias, weight stored [out_dim, in_dim] (PyTorch's
// nn.Linear layout, so a GPT's tied embedding can serve as its output weight).
// Conventions as in residual.hpp.
//
// The kernels read contiguous rows: the op makes its input so.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

namespace levers {

// "linear": out [n, out_dim] = in [n, in_dim] · weightᵀ + bias (optional).
struct LinearCall : KernelCallBase {
    static constexpr const char* kName = "linear";
    TensorArg out, in, weight, bias;
    std::int64_t out_ld = 0;  // how far apart rows of out are (0: out_dim; wider rows keep a GPU's products aligned)
};
// "linear_backward": d_in (optional, written), d_weight, d_bias (optional, added to).
struct LinearBackwardCall : KernelCallBase {
    static constexpr const char* kName = "linear_backward";
    TensorArg d_in, d_weight, d_bias, d_out, in, weight;
    std::int64_t out_ld = 0;  // as for the forward, for d_out
};

}  // namespace levers

namespace levers::kernels::cpu {

// out[n, out_dim] = in[n, in_dim] · weight[out_dim, in_dim]ᵀ + bias[out_dim] (bias may be null).
template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, index_t n, index_t in_dim,
                    index_t out_dim);

// d_in = d_out · weight (written), d_weight += d_outᵀ · in, d_bias += column
// sums of d_out; each skipped if null (a frozen layer needs only d_in).
template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight, index_t n,
                     index_t in_dim, index_t out_dim);

}  // namespace levers::kernels::cpu

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Checks the arguments of a linear layer and returns out's shape: in [..., in_dim]
// with weight [out_dim, in_dim] and bias [out_dim] gives [..., out_dim].
inline Shape linear_shape(const char* op, const Tensor& in, const Tensor& weight, const Tensor& bias) {
    check_float(op, "input", in);
    check_ndim_at_least(op, "input", in, 1);
    check_like(op, "weight", weight, "input", in);
    check_ndim_at_least(op, "weight", weight, 2);
    const std::int64_t in_dim = in.shape().last(), out_dim = weight.dim(0);
    check_shape(op, "weight", weight, {out_dim, in_dim},
                [&] { return fmt::format("'input' {} needs [*, {}]", in.shape().str(), in_dim); });
    if (bias.defined()) {
        check_like(op, "bias", bias, "input", in);
        check_shape(op, "bias", bias, {out_dim},
                    [&] { return fmt::format("'weight' {} needs [{}]", weight.shape().str(), out_dim); });
    }
    return in.shape().with_dim(in.shape().ndim() - 1, out_dim);
}

// The kernels, for the fused ops that are made of them.
inline void linear_into(const Tensor& out, const Tensor& in, const Tensor& weight, const Tensor& bias,
                        std::int64_t out_ld = 0) {
    LinearCall call{.out = arg(out), .in = arg(in), .weight = arg(weight), .bias = arg(bias), .out_ld = out_ld};
    run(in, call);
}
inline void linear_backward_into(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_out,
                                 const Tensor& in, const Tensor& weight, std::int64_t out_ld = 0) {
    LinearBackwardCall call{.d_in = arg(d_in), .d_weight = arg(d_weight), .d_bias = arg(d_bias), .d_out = arg(d_out),
                            .in = arg(in), .weight = arg(weight), .out_ld = out_ld};
    run(in, call);
}

// The gradients a linear layer's backward computes for (input, weight, bias)
// = inputs (k, k+1, k+2) of node `g`: the ones some tensor needs (a missing
// bias needs none).
inline void linear_grads(autograd::Backward& g, int k, const Tensor& d_out, const Tensor& in, const Tensor& weight) {
    const Tensor d_in = g.needs_grad(k) ? g.write_grad(k) : Tensor();
    const Tensor d_w = g.needs_grad(k + 1) ? g.add_grad(k + 1) : Tensor();
    const Tensor d_b = g.needs_grad(k + 2) ? g.add_grad(k + 2) : Tensor();
    if (d_in.defined() || d_w.defined() || d_b.defined()) linear_backward_into(d_in, d_w, d_b, d_out, in, weight);
}

// What a linear layer's backward reads.
struct LinearSaved {
    autograd::SavedTensor in, weight;
};

// in · weightᵀ + bias (bias may be undefined); differentiable. Any strides:
// the rows are made contiguous first.
inline Tensor linear(const Tensor& input, const Tensor& weight_in, const Tensor& bias_in = Tensor()) {
    const Tensor in = dense(input), weight = dense(weight_in), bias = dense(bias_in);
    Tensor out = Tensor::empty(linear_shape("linear", in, weight, bias), in.dtype(), in.device());
    linear_into(out, in, weight, bias);
    if (auto* s = autograd::record<LinearSaved>(
            "linear",
            [](autograd::Backward& g, const LinearSaved& s) { linear_grads(g, 0, g.grad_out(), s.in, s.weight); },
            {&in, &weight, &bias}, {&out}))
        *s = {.in = in, .weight = weight};
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__
