// residual add: out = a + b. Its backward is the identity for both inputs, so
// models pass d_out straight through; the forward doubles as the gradient sum
// where one activation feeds two branches (a fork's backward is an add).
// Conventions as in linear.hpp.
#pragma once

#include "kernels/common.hpp"

namespace levers::kernels::cpu {

// out[n] = a[n] + b[n]; out may alias a or b.
template <class T> void residual_forward(T* out, const T* a, const T* b, index_t n);
// d_a = d_out and d_b = d_out (written; either may be null or alias d_out).
template <class T> void residual_backward(T* d_a, T* d_b, const T* d_out, index_t n);

}  // namespace levers::kernels::cpu
