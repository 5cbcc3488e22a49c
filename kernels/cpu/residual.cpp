#include "kernels/residual.hpp"

#include <algorithm>

namespace levers::kernels::cpu {

template <class T> void residual_forward(T* out, const T* a, const T* b, index_t n) {
#pragma omp parallel for simd schedule(static)
    for (index_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <class T> void residual_backward(T* d_a, T* d_b, const T* d_out, index_t n) {
    if (d_a && d_a != d_out) std::copy(d_out, d_out + n, d_a);
    if (d_b && d_b != d_out) std::copy(d_out, d_out + n, d_b);
}

template void residual_forward<float>(float*, const float*, const float*, index_t);
template void residual_forward<double>(double*, const double*, const double*, index_t);
template void residual_backward<float>(float*, float*, const float*, index_t);
template void residual_backward<double>(double*, double*, const double*, index_t);

namespace {
template <class T> void add(const KernelCall& c) {
    residual_forward(c.t[0].as<T>(), c.t[1].as<T>(), c.t[2].as<T>(), c.t[0].numel());
}
LEVERS_KERNEL(add, cpu, f32, add<float>);
LEVERS_KERNEL(add, cpu, f64, add<double>);
}  // namespace

}  // namespace levers::kernels::cpu
