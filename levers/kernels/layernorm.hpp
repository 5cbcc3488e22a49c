// layernorm over the last dimension: out = (x - mean) * rstd * weight + bias.
// Conventions as in gelu.hpp. The per-row maths is shared with the CUDA
// kernel. The kernels read contiguous rows: the op makes its input so.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <cmath>

namespace levers {

// "layernorm": out, and mean and rstd (one per row, in the accumulator dtype: f32 for bf16).
struct LayerNormCall : KernelCallBase {
    static constexpr const char* kName = "layernorm";
    TensorArg out, mean, rstd, x, weight, bias;
    double eps = 1e-5;
};
// "layernorm_backward": d_x (written), d_weight and d_bias (added to; both or neither: frozen).
struct LayerNormBackwardCall : KernelCallBase {
    static constexpr const char* kName = "layernorm_backward";
    TensorArg d_x, d_weight, d_bias, d_out, x, mean, rstd, weight;
};

}  // namespace levers

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

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Normalises each row of x [..., C] and scales it by weight [C], shifting by bias [C]; differentiable.
inline Tensor layernorm(const Tensor& input, const Tensor& weight_in, const Tensor& bias_in, double eps = 1e-5) {
    check_float("layernorm", "x", input);
    const Tensor x = dense(input), weight = dense(weight_in), bias = dense(bias_in);
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
    LayerNormCall call{.out = arg(out), .mean = arg(mean), .rstd = arg(rstd), .x = arg(x), .weight = arg(weight),
                       .bias = arg(bias), .eps = eps};
    run(x, call);
    struct Saved {
        autograd::SavedTensor x, mean, rstd, weight;
    };
    if (auto* s = autograd::record<Saved>(
            "layernorm",
            [](autograd::Backward& g, const Saved& s) {
                // The kernels sum both parameter gradients or neither: a frozen one gets a scratch buffer.
                const bool params = g.needs_grad(1) || g.needs_grad(2);
                const Tensor d_w = params ? g.add_grad_or_scratch(1) : Tensor();
                const Tensor d_b = params ? g.add_grad_or_scratch(2) : Tensor();
                const Tensor d_x = g.write_grad_or_scratch(0);
                LayerNormBackwardCall call{.d_x = arg(d_x), .d_weight = arg(d_w), .d_bias = arg(d_b),
                                           .d_out = arg(g.grad_out()), .x = arg(s.x), .mean = arg(s.mean),
                                           .rstd = arg(s.rstd), .weight = arg(s.weight)};
                run(s.x.get(), call);
            },
            {&x, &weight, &bias}, {&out}))
        *s = {.x = x, .mean = mean, .rstd = rstd, .weight = weight};
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__
