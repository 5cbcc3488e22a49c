// Global gradient-norm clipping over a flat gradient buffer: if ‖g‖₂ > max_norm,
// g ← g · max_norm / (‖g‖₂ + 1e-6) (PyTorch's clip_grad_norm_).
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

namespace levers {

// "clip_grad_norm" (non-differentiable; by the gradients' dtype): grad clipped
// in place; the norm before clipping in *result (host memory).
struct ClipGradNormCall : KernelCallBase {
    static constexpr const char* kName = "clip_grad_norm";
    TensorArg grad;
    double max_norm = 0;
    double* result = nullptr;
};
// "scale": x scaled in place by `factor`.
struct ScaleCall : KernelCallBase {
    static constexpr const char* kName = "scale";
    TensorArg x;
    double factor = 1;
};

}  // namespace levers

namespace levers::kernels::cpu {

// ‖g‖₂ over n elements, accumulated in double.
template <class T> double grad_norm(const T* grad, index_t n);

// Clips in place; returns the norm before clipping. max_norm <= 0 disables
// clipping (the norm is still returned, for logging).
template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm);

}  // namespace levers::kernels::cpu

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Clips `grad` in place to a global norm of max_norm (<= 0: no clipping);
// returns the norm before (waits for the GPU).
inline double clip_grad_norm(const Tensor& grad, double max_norm) {
    double norm = 0;
    ClipGradNormCall call{.grad = arg(grad), .max_norm = max_norm, .result = &norm};
    run(grad, call);
    return norm;
}

// x *= s, in place.
inline void scale_(const Tensor& x, double s) {
    ScaleCall call{.x = arg(x), .factor = s};
    run(x, call);
}

}  // namespace levers::ops
#endif  // !__CUDACC__
