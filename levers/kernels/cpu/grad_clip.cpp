#include "levers/kernels/grad_clip.hpp"

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

namespace {
template <class T> void clip(const ClipGradNormCall& c) {
    *c.result = clip_grad_norm(c.grad.as<T>(), c.grad.numel(), c.max_norm);
}
template <class T> void scale(const ScaleCall& c) {
    T* x = c.x.as<T>();
    const T s = static_cast<T>(c.factor);
    const index_t n = c.x.numel();
#pragma omp parallel for simd schedule(static)
    for (index_t i = 0; i < n; ++i) x[i] *= s;
}
LEVERS_KERNEL(ClipGradNormCall, cpu, f32, clip<float>);
LEVERS_KERNEL(ClipGradNormCall, cpu, f64, clip<double>);
LEVERS_KERNEL(ScaleCall, cpu, f32, scale<float>);
LEVERS_KERNEL(ScaleCall, cpu, f64, scale<double>);
}  // namespace

}  // namespace levers::kernels::cpu
