#include "kernels/grad_clip.hpp"

#include <cmath>

namespace levers::kernels::cpu {

template <class T> double grad_norm(const T* grad, index_t n) {
    double sum = 0;
#pragma omp parallel for simd schedule(static) reduction(+ : sum)
    for (index_t i = 0; i < n; ++i) sum += static_cast<double>(grad[i]) * static_cast<double>(grad[i]);
    return std::sqrt(sum);
}

template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm) {
    double norm = grad_norm(grad, n);
    if (max_norm > 0 && norm > max_norm) {
        const T s = static_cast<T>(max_norm / (norm + 1e-6));
#pragma omp parallel for simd schedule(static)
        for (index_t i = 0; i < n; ++i) grad[i] *= s;
    }
    return norm;
}

template double grad_norm<float>(const float*, index_t);
template double grad_norm<double>(const double*, index_t);
template double clip_grad_norm<float>(float*, index_t, double);
template double clip_grad_norm<double>(double*, index_t, double);

}  // namespace levers::kernels::cpu
