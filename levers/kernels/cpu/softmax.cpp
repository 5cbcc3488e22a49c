#include "levers/kernels/softmax.hpp"

#include "levers/kernels/common.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"

#include <Eigen/Core>

namespace levers::kernels::cpu {

namespace {

template <class T> using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// One row through Eigen's vectorised exp: softmax, or log softmax.
template <class T> void softmax_row(T* out, const T* in, index_t n, bool log) {
    if (n == 0) return;
    ConstRow<T> x(in, n);
    Row<T> y(out, n);
    const T m = x.maxCoeff();
    y = (x - m).exp();
    const T sum = y.sum();
    if (log)
        y = x - (m + std::log(sum));
    else
        y *= T(1) / sum;
}

template <class T> void softmax_row_backward(T* d_in, const T* d_out, const T* out, index_t n, bool log) {
    ConstRow<T> g(d_out, n), y(out, n);
    Row<T> d(d_in, n);
    if (log) {
        const T total = g.sum();
        d = g - y.exp() * total;
    } else {
        const T dot = (g * y).sum();
        d = y * (g - dot);
    }
}

template <class T> void softmax(const SoftmaxCall& c) {
    const index_t n = c.in.shape.last(), rows = c.in.shape.rows();
    const T* in = c.in.as<const T>();
    T* out = c.out.as<T>();
    parallel_for(rows, rows * n >= (1 << 14), [&](index_t r) { softmax_row(out + r * n, in + r * n, n, c.log); });
}

template <class T> void softmax_grad(const SoftmaxBackwardCall& c) {
    const index_t n = c.out.shape.last(), rows = c.out.shape.rows();
    parallel_for(rows, rows * n >= (1 << 14), [&](index_t r) {
        softmax_row_backward(c.d_in.as<T>() + r * n, c.d_out.as<const T>() + r * n, c.out.as<const T>() + r * n, n,
                             c.log);
    });
}

LEVERS_KERNEL(SoftmaxCall, cpu, f32, softmax<float>);
LEVERS_KERNEL(SoftmaxCall, cpu, f64, softmax<double>);
LEVERS_KERNEL(SoftmaxBackwardCall, cpu, f32, softmax_grad<float>);
LEVERS_KERNEL(SoftmaxBackwardCall, cpu, f64, softmax_grad<double>);

}  // namespace
}  // namespace levers::kernels::cpu
