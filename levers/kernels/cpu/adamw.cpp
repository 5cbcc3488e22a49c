#include "levers/kernels/adamw.hpp"

#include "levers/core/error.hpp"
#include "levers/core/threads.hpp"

#include <algorithm>

namespace levers::kernels {

void append_adamw_chunks(std::vector<AdamWChunk>& out, std::int64_t start, std::int64_t n, bool decay) {
    LEVERS_CHECK(start >= 0 && n >= 0, "AdamW chunks need start >= 0 and n >= 0, got {} and {}", start, n);
    for (std::int64_t done = 0; done < n; done += kAdamWChunk)
        out.push_back({start + done, static_cast<std::int32_t>(std::min<std::int64_t>(kAdamWChunk, n - done)),
                       decay ? 1 : 0});
}

namespace cpu {

template <class T> void adamw_step(T* param, T* m, T* v, const T* grad, index_t n, const AdamWHyper& h, long step) {
    LEVERS_CHECK(step >= 1, "AdamW step counts from 1, got {}", step);
    const T lr = static_cast<T>(h.lr), b1 = static_cast<T>(h.beta1), b2 = static_cast<T>(h.beta2);
    const T eps = static_cast<T>(h.eps), wd = static_cast<T>(h.weight_decay);
    const T bc1 = static_cast<T>(1 - std::pow(h.beta1, static_cast<double>(step)));
    const T bc2 = static_cast<T>(1 - std::pow(h.beta2, static_cast<double>(step)));
    // A parameter tensor of a small model is a few thousand elements: a parallel region would cost more than it.
    if (n < (index_t{1} << 16) || threads() == 1) {
#pragma omp simd
        for (index_t i = 0; i < n; ++i) adamw_element(param[i], m[i], v[i], grad[i], lr, b1, b2, eps, wd, bc1, bc2);
        return;
    }
#pragma omp parallel for simd schedule(static)
    for (index_t i = 0; i < n; ++i) adamw_element(param[i], m[i], v[i], grad[i], lr, b1, b2, eps, wd, bc1, bc2);
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
    AdamWHyper h = c.hyper;
    T *p = c.param.as<T>(), *m = c.m.as<T>(), *v = c.v.as<T>();
    const T* g = c.grad.as<T>();
    for (index_t i = 0; i < n_chunks;) {
        const std::int64_t start = chunks[i].start;
        std::int64_t end = start + chunks[i].count;
        const std::int32_t decay = chunks[i].decay;
        for (++i; i < n_chunks && chunks[i].start == end && chunks[i].decay == decay; ++i) end += chunks[i].count;
        h.weight_decay = decay ? c.hyper.weight_decay : 0.0;
        adamw_step(p + start, m + start, v + start, g + start, end - start, h, static_cast<long>(c.step));
    }
}
LEVERS_KERNEL(AdamWCall, cpu, f32, adamw<float>);
LEVERS_KERNEL(AdamWCall, cpu, f64, adamw<double>);
}  // namespace

}  // namespace cpu
}  // namespace levers::kernels
