// rmsnorm over the last dimension: out = x · rstd · weight, rstd = 1/√(mean(x²) + eps)
// (Llama's RMSNorm), fused: one pass per row forward, one backward, where
// the same thing written from general ops (square, mean, rsqrt, two
// products) makes five tensors. Conventions as in layernorm.hpp; the
// per-row maths is shared with the CUDA kernel.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <cmath>

namespace levers {

// "rmsnorm": out, and rstd (one per row, in the accumulator dtype: f32 for bf16).
struct RmsNormCall : KernelCallBase {
    static constexpr const char* kName = "rmsnorm";
    TensorArg out, rstd, x, weight;
    double eps = 1e-6;
};
// "rmsnorm_backward": d_x (written), d_weight (added to; absent when frozen).
struct RmsNormBackwardCall : KernelCallBase {
    static constexpr const char* kName = "rmsnorm_backward";
    TensorArg d_x, d_weight, d_out, x, rstd, weight;
};

}  // namespace levers

namespace levers::kernels {

// One row's 1/√(mean(x²) + eps), accumulated in A.
template <class A, class T> LEVERS_HD A rmsnorm_row_rstd(const T* x, index_t channels, A eps) {
    A squares = 0;
    for (index_t c = 0; c < channels; ++c) squares += static_cast<A>(x[c]) * static_cast<A>(x[c]);
    return A(1) / std::sqrt(squares / static_cast<A>(channels) + eps);
}

// One row of the backward: d_x = rstd · (g·w − x̂ · mean(g·w·x̂)), x̂ = x · rstd.
template <class T>
LEVERS_HD void rmsnorm_row_backward(T* d_x, const T* d_out, const T* x, const T* weight, T rstd, index_t channels) {
    T mean_dot = 0;
    for (index_t c = 0; c < channels; ++c) mean_dot += d_out[c] * weight[c] * x[c] * rstd;
    mean_dot /= static_cast<T>(channels);
    for (index_t c = 0; c < channels; ++c) d_x[c] = rstd * (d_out[c] * weight[c] - x[c] * rstd * mean_dot);
}

}  // namespace levers::kernels

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Normalises each row of x [..., C] by its root mean square and scales it by
// weight [C]; differentiable in both. Equal to x · rsqrt(mean(x², -1) + eps) · weight.
inline Tensor rmsnorm(const Tensor& input, const Tensor& weight_in, double eps = 1e-6) {
    check_float("rmsnorm", "x", input);
    const Tensor x = dense(input), weight = dense(weight_in);
    check_ndim_at_least("rmsnorm", "x", x, 1);
    const std::int64_t channels = x.shape().last();
    check_like("rmsnorm", "weight", weight, "x", x);
    check_shape("rmsnorm", "weight", weight, {channels},
                [&] { return fmt::format("'x' {} needs [{}]", x.shape().str(), channels); });
    LEVERS_CHECK(eps >= 0, "rmsnorm: eps must be >= 0, got {}", eps);
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    Tensor rstd = Tensor::empty(Shape{x.shape().rows()}, accumulator(x.dtype()), x.device());
    RmsNormCall call{.out = arg(out), .rstd = arg(rstd), .x = arg(x), .weight = arg(weight), .eps = eps};
    run(x, call);
    struct Saved {
        autograd::SavedTensor x, rstd, weight;
    };
    if (auto* s = autograd::record<Saved>(
            "rmsnorm",
            [](autograd::Backward& g, const Saved& s) {
                const Tensor d_w = g.needs_grad(1) ? g.add_grad(1) : Tensor();
                const Tensor d_x = g.write_grad_or_scratch(0);
                RmsNormBackwardCall call{.d_x = arg(d_x), .d_weight = arg(d_w), .d_out = arg(g.grad_out()),
                                         .x = arg(s.x), .rstd = arg(s.rstd), .weight = arg(s.weight)};
                run(s.x.get(), call);
            },
            {&x, &weight}, {&out}))
        *s = {.x = x, .rstd = rstd, .weight = weight};
    return out;
}

}  // namespace levers::ops
#endif  // !__CUDACC__
