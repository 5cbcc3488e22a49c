// GELU, tanh form (GPT-2's): y = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))).
// Conventions as in linear.hpp.
#pragma once

#include "kernels/common.hpp"

#include <cmath>

namespace levers::kernels {

template <class T> LEVERS_HD T gelu_value(T x) {
    const T k = T(0.7978845608028654);  // √(2/π)
    return T(0.5) * x * (T(1) + std::tanh(k * (x + T(0.044715) * x * x * x)));
}

// dy/dx at x.
template <class T> LEVERS_HD T gelu_grad(T x) {
    const T k = T(0.7978845608028654);
    T u = k * (x + T(0.044715) * x * x * x);
    T t = std::tanh(u);
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3 * 0.044715) * x * x);
}

namespace cpu {
// out[n] = gelu(in[n]).
template <class T> void gelu_forward(T* out, const T* in, index_t n);
// d_in[n] = d_out[n] · gelu'(in[n]) (written; may alias d_out).
template <class T> void gelu_backward(T* d_in, const T* d_out, const T* in, index_t n);
}  // namespace cpu

}  // namespace levers::kernels
