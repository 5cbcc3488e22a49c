#include "levers/kernels/gelu.hpp"

#include <Eigen/Core>

#include <algorithm>

namespace levers::kernels::cpu {

namespace {

template <class T> using Arr = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T> using ConstArr = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;
constexpr index_t kChunk = 4096;  // elements per task (and the stack buffer of the backward)

// The same formulas as gelu_value / gelu_grad in the header, on whole arrays
// so Eigen's vectorised tanh is used (the scalar std::tanh dominated a step).
template <class T> void gelu_chunk(T* out, const T* in, index_t n) {
    const T k = T(0.7978845608028654);
    ConstArr<T> x(in, n);
    Arr<T>(out, n) = T(0.5) * x * (T(1) + (k * (x + T(0.044715) * x.cube())).tanh());
}

template <class T> void gelu_grad_chunk(T* d_in, const T* d_out, const T* in, index_t n) {
    const T k = T(0.7978845608028654);
    ConstArr<T> x(in, n), g(d_out, n);
    alignas(64) T buffer[kChunk];  // tanh once per element, without a heap temporary
    Arr<T> t(buffer, n);
    t = (k * (x + T(0.044715) * x.cube())).tanh();
    Arr<T>(d_in, n) =
        g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t.square()) * k * (T(1) + T(3 * 0.044715) * x.square()));
}

}  // namespace

template <class T> void gelu_forward(T* out, const T* in, index_t n) {
#pragma omp parallel for schedule(static)
    for (index_t start = 0; start < n; start += kChunk)
        gelu_chunk(out + start, in + start, std::min(kChunk, n - start));
}

template <class T> void gelu_backward(T* d_in, const T* d_out, const T* in, index_t n) {
#pragma omp parallel for schedule(static)
    for (index_t start = 0; start < n; start += kChunk)
        gelu_grad_chunk(d_in + start, d_out + start, in + start, std::min(kChunk, n - start));
}

template void gelu_forward<float>(float*, const float*, index_t);
template void gelu_forward<double>(double*, const double*, index_t);
template void gelu_backward<float>(float*, const float*, const float*, index_t);
template void gelu_backward<double>(double*, const double*, const double*, index_t);

namespace {
template <class T> void gelu(const GeluCall& c) { gelu_forward(c.out.as<T>(), c.in.as<T>(), c.out.numel()); }
template <class T> void gelu_grad(const GeluBackwardCall& c) {
    gelu_backward(c.d_in.as<T>(), c.d_out.as<T>(), c.in.as<T>(), c.d_in.numel());
}
LEVERS_KERNEL(GeluCall, cpu, f32, gelu<float>);
LEVERS_KERNEL(GeluCall, cpu, f64, gelu<double>);
LEVERS_KERNEL(GeluBackwardCall, cpu, f32, gelu_grad<float>);
LEVERS_KERNEL(GeluBackwardCall, cpu, f64, gelu_grad<double>);
}  // namespace

}  // namespace levers::kernels::cpu
