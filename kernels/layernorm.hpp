// layernorm over the last dimension: out = (x - mean) * rstd * weight + bias.
// Conventions as in residual.hpp. The per-row maths is shared with the CUDA kernel.
//
// Kernel "layernorm": t0 out, t1 mean, t2 rstd (one per row, in the
// accumulator dtype: f32 for bf16), t3 x, t4 weight, t5 bias; f0 eps.
// "layernorm_backward": t0 d_x (written), t1 d_weight, t2 d_bias (added to;
// both or neither: frozen), t3 d_out, t4 x, t5 mean, t6 rstd, t7 weight.
#pragma once

#include "kernels/common.hpp"
#include "kernels/op.hpp"

#include <cmath>

namespace levers::kernels {

// One row of the forward: writes out[0..C) and this row's mean and rstd.
template <class T>
LEVERS_HD void layernorm_row_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                                     index_t channels, T eps) {
    T m = 0;
    for (index_t c = 0; c < channels; ++c) m += x[c];
    m /= static_cast<T>(channels);
    T var = 0;
    for (index_t c = 0; c < channels; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<T>(channels);
    T r = T(1) / std::sqrt(var + eps);
    for (index_t c = 0; c < channels; ++c) out[c] = (x[c] - m) * r * weight[c] + bias[c];
    *mean = m;
    *rstd = r;
}

// One row of the backward: writes d_x[0..C). (Weight and bias gradients are
// sums over rows and are reduced separately.)
template <class T>
LEVERS_HD void layernorm_row_backward(T* d_x, const T* d_out, const T* x, const T* weight, T mean, T rstd,
                                      index_t channels) {
    T mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (index_t c = 0; c < channels; ++c) {
        T dxhat = d_out[c] * weight[c];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * (x[c] - mean) * rstd;
    }
    mean_dxhat /= static_cast<T>(channels);
    mean_dxhat_xhat /= static_cast<T>(channels);
    for (index_t c = 0; c < channels; ++c) {
        T xhat = (x[c] - mean) * rstd;
        d_x[c] = rstd * (d_out[c] * weight[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
}

namespace cpu {

// out[rows, C], mean[rows], rstd[rows] (saved for backward); x[rows, C]; weight[C], bias[C].
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                       index_t channels, T eps = T(1e-5));

// d_x written; d_weight, d_bias added to (each skipped if null: frozen).
template <class T>
void layernorm_backward(T* d_x, T* d_weight, T* d_bias, const T* d_out, const T* x, const T* mean, const T* rstd,
                        const T* weight, index_t rows, index_t channels);

}  // namespace cpu
}  // namespace levers::kernels

namespace levers::ops {

// Normalises each row of x [..., C] and scales it by weight [C], shifting by bias [C]; differentiable.
inline Tensor layernorm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5) {
    static KernelSlot& forward = kernel_slot("layernorm");
    check_float("layernorm", "x", x);
    check_ndim_at_least("layernorm", "x", x, 1);
    const std::int64_t channels = x.shape().last();
    auto why = [&] { return fmt::format("'x' {} needs [{}]", x.shape().str(), channels); };
    check_like("layernorm", "weight", weight, "x", x);
    check_shape("layernorm", "weight", weight, {channels}, why);
    check_like("layernorm", "bias", bias, "x", x);
    check_shape("layernorm", "bias", bias, {channels}, why);
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    const Shape rows{x.shape().rows()};
    Tensor mean = Tensor::empty(rows, accumulator(x.dtype()), x.device());
    Tensor rstd = Tensor::empty(rows, accumulator(x.dtype()), x.device());
    KernelCall call = call_of(out, mean, rstd, x, weight, bias);
    call.f[0] = eps;
    run(forward, x, call);
    if (auto* node = autograd::record(
            "layernorm",
            [](autograd::Backward& g) {
                static KernelSlot& backward = kernel_slot("layernorm_backward");
                const Tensor& x = g.saved(0);
                // The kernels sum both parameter gradients or neither: a frozen one gets a scratch buffer.
                const bool params = g.needs_grad(1) || g.needs_grad(2);
                const Tensor d_w = params ? g.add_grad_or_scratch(1) : Tensor();
                const Tensor d_b = params ? g.add_grad_or_scratch(2) : Tensor();
                const Tensor d_x = g.write_grad_or_scratch(0);
                KernelCall call = call_of(d_x, d_w, d_b, g.grad_out(), x, g.saved(1), g.saved(2), g.saved(3));
                run(backward, x, call);
            },
            {&x, &weight, &bias}, {&out})) {
        node->save(0, x);
        node->save(1, mean);
        node->save(2, rstd);
        node->save(3, weight);
    }
    return out;
}

}  // namespace levers::ops
