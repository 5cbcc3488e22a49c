// GELU, tanh form (GPT-2's): y = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))).
// Conventions as in residual.hpp.
//
// Kernel "gelu": t0 out, t1 in. "gelu_backward": t0 d_in, t1 d_out, t2 in
// (d_in may alias d_out).
#pragma once

#include "kernels/common.hpp"
#if !defined(__CUDACC__)
#include "kernels/op.hpp"
#endif

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

// The op itself is host code of levers' C++; nvcc compiles only the maths above.
#if !defined(__CUDACC__)

namespace levers::ops {

// d_in = d_out · gelu'(in), through the backends' "gelu_backward" (the fused ops use it too).
inline void gelu_backward_into(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
    static KernelSlot& kernel = kernel_slot("gelu_backward");
    KernelCall call = call_of(d_in, d_out, in);
    run(kernel, in, call);
}

// gelu(x) element by element; differentiable.
inline Tensor gelu(const Tensor& x) {
    static KernelSlot& kernel = kernel_slot("gelu");
    check_float("gelu", "x", x);
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    KernelCall call = call_of(out, x);
    run(kernel, x, call);
    if (auto* node = autograd::record(
            "gelu", [](autograd::Backward& g) { gelu_backward_into(g.write_grad(0), g.grad_out(), g.saved(0)); },
            {&x}, {&out}))
        node->save(0, x);
    return out;
}

}  // namespace levers::ops

#endif  // !__CUDACC__
