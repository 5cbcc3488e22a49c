#include "kernels/linear.hpp"

#include "framework/core/error.hpp"
#include "kernels/cpu/eigen_maps.hpp"

namespace levers::kernels::cpu {

template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, index_t n, index_t in_dim,
                    index_t out_dim) {
    MatMap<T> y(out, n, out_dim);
    y.noalias() = ConstMatMap<T>(in, n, in_dim) * ConstMatMap<T>(weight, out_dim, in_dim).transpose();
    if (bias) y.rowwise() += ConstRowVecMap<T>(bias, out_dim);
}

template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight, index_t n,
                     index_t in_dim, index_t out_dim) {
    ConstMatMap<T> dy(d_out, n, out_dim);
    if (d_in) MatMap<T>(d_in, n, in_dim).noalias() = dy * ConstMatMap<T>(weight, out_dim, in_dim);
    if (d_weight) MatMap<T>(d_weight, out_dim, in_dim).noalias() += dy.transpose() * ConstMatMap<T>(in, n, in_dim);
    if (d_bias) RowVecMap<T>(d_bias, out_dim) += dy.colwise().sum();
}

template void linear_forward<float>(float*, const float*, const float*, const float*, index_t, index_t, index_t);
template void linear_forward<double>(double*, const double*, const double*, const double*, index_t, index_t,
                                     index_t);
template void linear_backward<float>(float*, float*, float*, const float*, const float*, const float*, index_t,
                                     index_t, index_t);
template void linear_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                      index_t, index_t, index_t);

namespace {
// Rows of out (and d_out) packed: the CPU products take any width, so nothing pads them here.
void check_packed(const KernelCall& c, index_t out_dim) {
    LEVERS_CHECK(c.i[0] == 0 || c.i[0] == out_dim, "linear on the CPU: rows {} apart for {} columns (the CPU "
                 "kernels take packed rows)", c.i[0], out_dim);
}
template <class T> void linear(const KernelCall& c) {
    const index_t out_dim = c.t[2].shape[0], in_dim = c.t[2].shape[1];
    check_packed(c, out_dim);
    linear_forward(c.t[0].as<T>(), c.t[1].as<T>(), c.t[2].as<T>(), c.t[3].as<T>(), c.t[1].shape.rows(), in_dim,
                   out_dim);
}
template <class T> void linear_grad(const KernelCall& c) {
    const index_t out_dim = c.t[5].shape[0], in_dim = c.t[5].shape[1];
    check_packed(c, out_dim);
    linear_backward(c.t[0].as<T>(), c.t[1].as<T>(), c.t[2].as<T>(), c.t[3].as<T>(), c.t[4].as<T>(), c.t[5].as<T>(),
                    c.t[4].shape.rows(), in_dim, out_dim);
}
LEVERS_KERNEL(linear, cpu, f32, linear<float>);
LEVERS_KERNEL(linear, cpu, f64, linear<double>);
LEVERS_KERNEL(linear_backward, cpu, f32, linear_grad<float>);
LEVERS_KERNEL(linear_backward, cpu, f64, linear_grad<double>);
}  // namespace

}  // namespace levers::kernels::cpu
