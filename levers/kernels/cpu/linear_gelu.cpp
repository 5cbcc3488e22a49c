// The fused linear-and-GELU kernels on the CPU: the linear and GELU kernels in turn.
#include "levers/kernels/linear_gelu.hpp"

namespace levers::kernels::cpu {

namespace {

template <class T> void linear_gelu(const LinearGeluCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1], rows = c.in.shape.rows();
    linear_forward(c.pre.as<T>(), c.in.as<T>(), c.weight.as<T>(), c.bias.as<T>(), rows, in_dim, out_dim);
    gelu_forward(c.out.as<T>(), c.pre.as<T>(), rows * out_dim);
}

template <class T> void gelu_linear_grad(const GeluLinearBackwardCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1], rows = c.in.shape.rows();
    T* d_pre = c.d_pre.as<T>();
    linear_backward(d_pre, c.d_weight.as<T>(), c.d_bias.as<T>(), c.d_out.as<T>(), c.in.as<T>(), c.weight.as<T>(), rows,
                    in_dim, out_dim);
    gelu_backward(d_pre, d_pre, c.pre.as<T>(), rows * in_dim);
}

LEVERS_KERNEL(LinearGeluCall, cpu, f32, linear_gelu<float>);
LEVERS_KERNEL(LinearGeluCall, cpu, f64, linear_gelu<double>);
LEVERS_KERNEL(GeluLinearBackwardCall, cpu, f32, gelu_linear_grad<float>);
LEVERS_KERNEL(GeluLinearBackwardCall, cpu, f64, gelu_linear_grad<double>);

}  // namespace

}  // namespace levers::kernels::cpu
