// Global gradient-norm clipping over a flat gradient buffer: if ‖g‖₂ > max_norm,
// g ← g · max_norm / (‖g‖₂ + 1e-6) (PyTorch's clip_grad_norm_).
//
// Kernels (non-differentiable; by the gradients' dtype): "clip_grad_norm":
// t0 grad (clipped in place); f0 max_norm; the norm before clipping in
// *result. "scale": t0 x (scaled in place); f0 the factor.
#pragma once

#include "kernels/common.hpp"
#include "kernels/op.hpp"

namespace levers::kernels::cpu {

// ‖g‖₂ over n elements, accumulated in double.
template <class T> double grad_norm(const T* grad, index_t n);

// Clips in place; returns the norm before clipping. max_norm <= 0 disables
// clipping (the norm is still returned, for logging).
template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm);

}  // namespace levers::kernels::cpu

namespace levers::ops {

// Clips `grad` in place to a global norm of max_norm (<= 0: no clipping);
// returns the norm before (waits for the card).
inline double clip_grad_norm(const Tensor& grad, double max_norm) {
    static KernelSlot& kernel = kernel_slot("clip_grad_norm");
    double norm = 0;
    KernelCall call = call_of(grad);
    call.f[0] = max_norm;
    call.result = &norm;
    run(kernel, grad, call);
    return norm;
}

// x *= s, in place.
inline void scale_(const Tensor& x, double s) {
    static KernelSlot& kernel = kernel_slot("scale");
    KernelCall call = call_of(x);
    call.f[0] = s;
    run(kernel, x, call);
}

}  // namespace levers::ops
