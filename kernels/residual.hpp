// add: out = a + b (the residual connection, and the sum of two gradients
// where one activation feeds two branches). Conventions of every op: the
// pointer-level CPU reference functions take outputs, saved state, inputs,
// parameters, sizes; backward *writes* activation gradients and *adds* into
// parameter gradients.
//
// Kernel "add": t0 out, t1 a, t2 b (same shape; out may alias a or b).
#pragma once

#include "kernels/common.hpp"
#include "kernels/op.hpp"

namespace levers::kernels::cpu {

// out[n] = a[n] + b[n]; out may alias a or b.
template <class T> void residual_forward(T* out, const T* a, const T* b, index_t n);
// d_a = d_out and d_b = d_out (written; either may be null or alias d_out).
template <class T> void residual_backward(T* d_a, T* d_b, const T* d_out, index_t n);

}  // namespace levers::kernels::cpu

namespace levers::ops {

// a + b, the same shape, dtype and device; differentiable (both inputs get the gradient as it is).
inline Tensor add(const Tensor& a, const Tensor& b) {
    static KernelSlot& kernel = kernel_slot("add");
    check_float("add", "a", a);
    check_like("add", "b", b, "a", a);
    check_shape("add", "b", b, a.shape(), [&] { return "'a' is " + a.shape().str(); });
    Tensor out = Tensor::empty(a.shape(), a.dtype(), a.device());
    KernelCall call = call_of(out, a, b);
    run(kernel, a, call);
    autograd::record(
        "add",
        [](autograd::Backward& g) {
            g.pass_grad(0, g.grad_out());
            g.pass_grad(1, g.grad_out());
        },
        {&a, &b}, {&out});
    return out;
}

}  // namespace levers::ops

namespace levers {
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
}  // namespace levers
