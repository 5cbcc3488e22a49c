#include "levers/kernels/grad_clip.hpp"

#include "levers/kernels/cpu/strided_loop.hpp"

#include <algorithm>
#include <cmath>

namespace levers::kernels::cpu {

namespace {
// Σ x²: in T over 16 lanes (two AVX2 registers of floats, so that the adds do
// not wait on one another's latency) for each block of 256 elements, whose
// lanes then add up in double.
template <class T> double sum_squares(const T* x, index_t n) {
    constexpr index_t kLanes = 16, kBlock = 256;
    double lanes[kLanes] = {};
    index_t i = 0;
    for (; i + kBlock <= n; i += kBlock) {
        T acc[kLanes] = {};
        for (index_t j = i; j < i + kBlock; j += kLanes)
#pragma omp simd
            for (index_t k = 0; k < kLanes; ++k) acc[k] += x[j + k] * x[j + k];
#pragma omp simd
        for (index_t k = 0; k < kLanes; ++k) lanes[k] += static_cast<double>(acc[k]);
    }
    double sum = 0;
    for (; i < n; ++i) sum += static_cast<double>(x[i]) * static_cast<double>(x[i]);
    for (const double l : lanes) sum += l;
    return sum;
}

template <class T> void scale_by(T* x, index_t n, T s) {
    for_flat_blocks(n, [=](index_t begin, index_t end) {
        const T factor = s;  // a local: the closure's copy might be reread after each store
#pragma omp simd
        for (index_t i = begin; i < end; ++i) x[i] *= factor;
    });
}
}  // namespace

template <class T> double grad_norm(const T* grad, index_t n) {
    if (!flat_parallel(n)) return std::sqrt(sum_squares(grad, n));
    // A reduction across threads: its own parallel loop (for_flat_blocks has no sum), over the same blocks.
    const index_t blocks = (n + kFlatBlock - 1) / kFlatBlock;
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (index_t b = 0; b < blocks; ++b)
        sum += sum_squares(grad + b * kFlatBlock, std::min(kFlatBlock, n - b * kFlatBlock));
    return std::sqrt(sum);
}

template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm) {
    double norm = grad_norm(grad, n);
    if (max_norm > 0 && norm > max_norm) scale_by(grad, n, static_cast<T>(max_norm / (norm + 1e-6)));
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
template <class T> void scale(const ScaleCall& c) { scale_by(c.x.as<T>(), c.x.numel(), static_cast<T>(c.factor)); }
LEVERS_KERNEL(ClipGradNormCall, cpu, f32, clip<float>);
LEVERS_KERNEL(ClipGradNormCall, cpu, f64, clip<double>);
LEVERS_KERNEL(ScaleCall, cpu, f32, scale<float>);
LEVERS_KERNEL(ScaleCall, cpu, f64, scale<double>);
}  // namespace

}  // namespace levers::kernels::cpu
