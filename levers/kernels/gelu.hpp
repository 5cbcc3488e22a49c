// GELU, tanh form (GPT-2's): y = x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³))),
// with kernels of its own (vectorised tanh), which the fused linear ops use
// too; the exact form is ops::gelu_erf (levers/kernels/elementwise.hpp). The
// kernels read contiguous memory: the op makes its input so.
//
// Conventions of every op: a kernel's call names its tensors (outputs, saved
// state, inputs, parameters), the pointer-level CPU reference functions take
// them in that order with the sizes after; backward *writes* activation
// gradients and *adds* into parameter gradients.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <cmath>

namespace levers {

// "gelu": out = gelu(in). "gelu_backward": d_in = d_out · gelu'(in) (d_in may alias d_out).
struct GeluCall : KernelCallBase {
    static constexpr const char* kName = "gelu";
    TensorArg out, in;
};
struct GeluBackwardCall : KernelCallBase {
    static constexpr const char* kName = "gelu_backward";
    TensorArg d_in, d_out, in;
};

}  // namespace levers

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
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/op.hpp"

namespace levers::ops {

// d_in = d_out · gelu'(in), through the backends' "gelu_backward" (the fused ops use it too).
inline void gelu_backward_into(const Tensor& d_in, const Tensor& d_out, const Tensor& in) {
    GeluBackwardCall call{.d_in = arg(d_in), .d_out = arg(d_out), .in = arg(in)};
    run(in, call);
}

// gelu(x) element by element, the tanh form unless `form` says erf (PyTorch's default); differentiable.
inline Tensor gelu(const Tensor& input, GeluForm form = GeluForm::tanh) {
    if (form == GeluForm::erf) return gelu_erf(input);
    check_float("gelu", "x", input);
    const Tensor x = dense(input);
    Tensor out = Tensor::empty(x.shape(), x.dtype(), x.device());
    GeluCall call{.out = arg(out), .in = arg(x)};
    run(x, call);
    struct Saved {
        autograd::SavedTensor x;
    };
    if (auto* s = autograd::record<Saved>(
            "gelu",
            [](autograd::Backward& g, const Saved& s) { gelu_backward_into(g.write_grad(0), g.grad_out(), s.x); },
            {&x}, {&out}))
        s->x = x;
    return out;
}

}  // namespace levers::ops

#endif  // !__CUDACC__
