// linear: out = in · weightᵀ + bias, weight stored [out_dim, in_dim] (PyTorch's
// nn.Linear layout, so a GPT's tied embedding can serve as its output weight).
// Conventions as in residual.hpp.
//
// Kernel "linear": t0 out [n, out_dim], t1 in [n, in_dim], t2 weight, t3 bias
// (optional); i0 how far apart rows of out are (0: out_dim; wider rows keep a
// card's products aligned, as for a GPT's logits). "linear_backward": t0 d_in
// (optional, written), t1 d_weight, t2 d_bias (optional, added to), t3 d_out,
// t4 in, t5 weight; i0 as for the forward, for d_out.
#pragma once

#include "kernels/common.hpp"
#include "kernels/op.hpp"

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
    static KernelSlot& kernel = kernel_slot("linear");
    KernelCall call = call_of(out, in, weight, bias);
    call.i[0] = out_ld;
    run(kernel, in, call);
}
inline void linear_backward_into(const Tensor& d_in, const Tensor& d_weight, const Tensor& d_bias, const Tensor& d_out,
                                 const Tensor& in, const Tensor& weight, std::int64_t out_ld = 0) {
    static KernelSlot& kernel = kernel_slot("linear_backward");
    KernelCall call = call_of(d_in, d_weight, d_bias, d_out, in, weight);
    call.i[0] = out_ld;
    run(kernel, in, call);
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

// in · weightᵀ + bias (bias may be undefined); differentiable.
inline Tensor linear(const Tensor& in, const Tensor& weight, const Tensor& bias = Tensor()) {
    Tensor out = Tensor::empty(linear_shape("linear", in, weight, bias), in.dtype(), in.device());
    linear_into(out, in, weight, bias);
    if (auto* node = autograd::record(
            "linear",
            [](autograd::Backward& g) {
                linear_grads(g, 0, g.grad_out(), g.saved(0), g.saved(1));
            },
            {&in, &weight, &bias}, {&out})) {
        node->save(0, in);
        node->save(1, weight);
    }
    return out;
}

}  // namespace levers::ops
