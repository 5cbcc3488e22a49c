#include "kernels/gelu.hpp"

namespace levers::kernels::cpu {

template <class T> void gelu_forward(T* out, const T* in, index_t n) {
#pragma omp parallel for simd schedule(static)
    for (index_t i = 0; i < n; ++i) out[i] = gelu_value(in[i]);
}

template <class T> void gelu_backward(T* d_in, const T* d_out, const T* in, index_t n) {
#pragma omp parallel for simd schedule(static)
    for (index_t i = 0; i < n; ++i) d_in[i] = d_out[i] * gelu_grad(in[i]);
}

template void gelu_forward<float>(float*, const float*, index_t);
template void gelu_forward<double>(double*, const double*, index_t);
template void gelu_backward<float>(float*, const float*, const float*, index_t);
template void gelu_backward<double>(double*, const double*, const double*, index_t);

}  // namespace levers::kernels::cpu
