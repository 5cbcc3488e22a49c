// Global gradient-norm clipping over a flat gradient buffer: if ‖g‖₂ > max_norm,
// g ← g · max_norm / (‖g‖₂ + 1e-6) (PyTorch's clip_grad_norm_).
#pragma once

#include "kernels/common.hpp"

namespace levers::kernels::cpu {

// ‖g‖₂ over n elements, accumulated in double.
template <class T> double grad_norm(const T* grad, index_t n);

// Clips in place; returns the norm before clipping. max_norm <= 0 disables
// clipping (the norm is still returned, for logging).
template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm);

}  // namespace levers::kernels::cpu
