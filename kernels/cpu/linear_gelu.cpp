// The fused linear-and-GELU kernels on the CPU: the linear and GELU kernels in turn.
#include "kernels/gelu.hpp"
#include "kernels/linear.hpp"

namespace levers::kernels::cpu {

namespace {

template <class T> void linear_gelu(const KernelCall& c) {
    const index_t out_dim = c.t[3].shape[0], in_dim = c.t[3].shape[1], rows = c.t[2].shape.rows();
    linear_forward(c.t[1].as<T>(), c.t[2].as<T>(), c.t[3].as<T>(), c.t[4].as<T>(), rows, in_dim, out_dim);
    gelu_forward(c.t[0].as<T>(), c.t[1].as<T>(), rows * out_dim);
}

template <class T> void gelu_linear_grad(const KernelCall& c) {
    const index_t out_dim = c.t[6].shape[0], in_dim = c.t[6].shape[1], rows = c.t[4].shape.rows();
    T* d_pre = c.t[0].as<T>();
    linear_backward(d_pre, c.t[1].as<T>(), c.t[2].as<T>(), c.t[3].as<T>(), c.t[4].as<T>(), c.t[6].as<T>(), rows,
                    in_dim, out_dim);
    gelu_backward(d_pre, d_pre, c.t[5].as<T>(), rows * in_dim);
}

LEVERS_KERNEL(linear_gelu, cpu, f32, linear_gelu<float>);
LEVERS_KERNEL(linear_gelu, cpu, f64, linear_gelu<double>);
LEVERS_KERNEL(gelu_linear_backward, cpu, f32, gelu_linear_grad<float>);
LEVERS_KERNEL(gelu_linear_backward, cpu, f64, gelu_linear_grad<double>);

}  // namespace

}  // namespace levers::kernels::cpu
