#include "levers/kernels/linear.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/cpu/eigen_maps.hpp"
#include "levers/kernels/cpu/few_rows_product.hpp"

#include <type_traits>

namespace levers::kernels::cpu {

template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, index_t n, index_t in_dim,
                    index_t out_dim) {
    MatMap<T> y(out, n, out_dim);
    if constexpr (std::is_same_v<T, float>) {
        if (n <= kFewRows && have_few_rows_product()) {
            few_rows_product(out, in, weight, n, in_dim, out_dim);
            if (bias) y.rowwise() += ConstRowVecMap<T>(bias, out_dim);
            return;
        }
    }
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
void check_packed(index_t out_ld, index_t out_dim) {
    LEVERS_CHECK(out_ld == 0 || out_ld == out_dim, "linear on the CPU: rows {} apart for {} columns (the CPU "
                 "kernels take packed rows)", out_ld, out_dim);
}
template <class T> void linear(const LinearCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1];
    check_packed(c.out_ld, out_dim);
    linear_forward(c.out.as<T>(), c.in.as<T>(), c.weight.as<T>(), c.bias.as<T>(), c.in.shape.rows(), in_dim, out_dim);
}
template <class T> void linear_grad(const LinearBackwardCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1];
    check_packed(c.out_ld, out_dim);
    linear_backward(c.d_in.as<T>(), c.d_weight.as<T>(), c.d_bias.as<T>(), c.d_out.as<T>(), c.in.as<T>(),
                    c.weight.as<T>(), c.in.shape.rows(), in_dim, out_dim);
}
LEVERS_KERNEL(LinearCall, cpu, f32, linear<float>);
LEVERS_KERNEL(LinearCall, cpu, f64, linear<double>);
LEVERS_KERNEL(LinearBackwardCall, cpu, f32, linear_grad<float>);
LEVERS_KERNEL(LinearBackwardCall, cpu, f64, linear_grad<double>);
}  // namespace

}  // namespace levers::kernels::cpu
