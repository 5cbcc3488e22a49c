#include "levers/kernels/adamw.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"

#include <algorithm>

namespace levers::kernels {

void append_adamw_chunks(std::vector<AdamWChunk>& out, std::int64_t start, std::int64_t n, bool decay) {
    LEVERS_CHECK(start >= 0 && n >= 0, "AdamW chunks need start >= 0 and n >= 0, got {} and {}", start, n);
    for (std::int64_t done = 0; done < n; done += kAdamWChunk)
        out.push_back({start + done, static_cast<std::int32_t>(std::min<std::int64_t>(kAdamWChunk, n - done)),
                       decay ? 1 : 0});
}

namespace cpu {

namespace {
// A step's scalars in T, the bias corrections' powers taken once a step rather
// than once a parameter tensor (a small model has dozens).
template <class T> struct StepScalars {
    T lr, b1, b2, eps, wd, bc1, bc2;
    StepScalars(const AdamWHyper& h, long step)
        : lr(static_cast<T>(h.lr)), b1(static_cast<T>(h.beta1)), b2(static_cast<T>(h.beta2)),
          eps(static_cast<T>(h.eps)), wd(static_cast<T>(h.weight_decay)),
          bc1(static_cast<T>(1 - std::pow(h.beta1, static_cast<double>(step)))),
          bc2(static_cast<T>(1 - std::pow(h.beta2, static_cast<double>(step)))) {
        LEVERS_CHECK(step >= 1, "AdamW step counts from 1, got {}", step);
    }
};

// Elements [begin, end) of a tensor; `wd`: their weight decay (0 for biases and norms).
// The scalars come by value and are read into locals: through a reference (or
// a closure), every store to the float arrays might change them, and the loop
// would read them again each element.
template <class T>
void update_range(T* param, T* m, T* v, const T* grad, index_t begin, index_t end, const StepScalars<T> s, T wd) {
    const T lr = s.lr, b1 = s.b1, b2 = s.b2, eps = s.eps, bc1 = s.bc1, bc2 = s.bc2;
#pragma omp simd
    for (index_t i = begin; i < end; ++i) adamw_element(param[i], m[i], v[i], grad[i], lr, b1, b2, eps, wd, bc1, bc2);
}
template <class T> void update(T* param, T* m, T* v, const T* grad, index_t n, const StepScalars<T> s, T wd) {
    for_flat_blocks(n, [&](index_t begin, index_t end) { update_range(param, m, v, grad, begin, end, s, wd); });
}
}  // namespace

template <class T> void adamw_step(T* param, T* m, T* v, const T* grad, index_t n, const AdamWHyper& h, long step) {
    const StepScalars<T> s(h, step);
    update(param, m, v, grad, n, s, s.wd);
}

template void adamw_step<float>(float*, float*, float*, const float*, index_t, const AdamWHyper&, long);
template void adamw_step<double>(double*, double*, double*, const double*, index_t, const AdamWHyper&, long);

namespace {
// One call per run of contiguous chunks that agree on decay: each parameter
// tensor's elements in one parallel loop.
template <class T> void adamw(const AdamWCall& c) {
    LEVERS_CHECK(c.grad.dtype == c.param.dtype, "AdamW on the CPU takes {} gradients for {} parameters, not {}",
                 name_of(c.param.dtype), name_of(c.param.dtype), name_of(c.grad.dtype));
    const auto* chunks = reinterpret_cast<const AdamWChunk*>(c.chunks.data);
    const index_t n_chunks = c.chunks.numel() / 4;
    const StepScalars<T> s(c.hyper, static_cast<long>(c.step));
    T *p = c.param.as<T>(), *m = c.m.as<T>(), *v = c.v.as<T>();
    const T* g = c.grad.as<T>();
    for (index_t i = 0; i < n_chunks;) {
        const std::int64_t start = chunks[i].start;
        std::int64_t end = start + chunks[i].count;
        const std::int32_t decay = chunks[i].decay;
        for (++i; i < n_chunks && chunks[i].start == end && chunks[i].decay == decay; ++i) end += chunks[i].count;
        update(p + start, m + start, v + start, g + start, end - start, s, decay ? s.wd : T(0));
    }
}
LEVERS_KERNEL(AdamWCall, cpu, f32, adamw<float>);
LEVERS_KERNEL(AdamWCall, cpu, f64, adamw<double>);
}  // namespace

}  // namespace cpu
}  // namespace levers::kernels
