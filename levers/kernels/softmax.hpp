// softmax and log_softmax along any dimension. The kernels work along the
// last dimension of contiguous rows; for another dimension the op moves it
// last first (a transposed copy) and the result back (a view).
//
// softmax: y = e^(x - max) / Σ e^(x - max); backward d_x = y ⊙ (d_y - Σ d_y ⊙ y).
// log_softmax: y = x - max - log Σ e^(x - max); backward d_x = d_y - e^y · Σ d_y.
#pragma once

#include "levers/core/kernel.hpp"

namespace levers {

// "softmax": out = (log_)softmax of each row of `in` (contiguous, rows along the last dimension).
struct SoftmaxCall : KernelCallBase {
    static constexpr const char* kName = "softmax";
    TensorArg out, in;
    bool log = false;
};
// "softmax_backward": d_in (written) from d_out and the forward's out, all contiguous rows.
struct SoftmaxBackwardCall : KernelCallBase {
    static constexpr const char* kName = "softmax_backward";
    TensorArg d_in, d_out, out;
    bool log = false;
};

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

namespace detail {
inline Tensor softmax_last(const Tensor& x, bool log) {
    const Tensor rows = x.contiguous();
    Tensor out = Tensor::empty(rows.shape(), rows.dtype(), rows.device());
    SoftmaxCall call{.out = arg(out), .in = arg(rows), .log = log};
    run(rows, call);
    struct Saved {
        autograd::SavedTensor out;
        bool log;
    };
    if (auto* s = autograd::record<Saved>(
            log ? "log_softmax" : "softmax",
            [](autograd::Backward& g, const Saved& s) {
                SoftmaxBackwardCall call{.d_in = arg(g.write_grad(0)), .d_out = arg(g.grad_out()), .out = arg(s.out),
                                         .log = s.log};
                run(s.out.get(), call);
            },
            {&rows}, {&out}))
        *s = {.out = out, .log = log};
    return out;
}
inline Tensor softmax_along(const char* op, const Tensor& x, int dim, bool log) {
    check_float(op, "x", x);
    const int d = x.shape().ndim() == 0 ? 0 : wrap_dim(op, dim, x.shape().ndim());
    const int last = x.shape().ndim() - 1;
    if (last <= 0 || d == last) return softmax_last(x, log);
    return softmax_last(x.transpose(d, last), log).transpose(d, last);
}
}  // namespace detail

// e^x / Σ e^x along `dim` (negative counts from the end); differentiable.
inline Tensor softmax(const Tensor& x, int dim = -1) { return detail::softmax_along("softmax", x, dim, false); }
// log softmax(x) along `dim`, computed without forming softmax(x); differentiable.
inline Tensor log_softmax(const Tensor& x, int dim = -1) { return detail::softmax_along("log_softmax", x, dim, true); }

}  // namespace levers::ops
#endif  // !__CUDACC__
