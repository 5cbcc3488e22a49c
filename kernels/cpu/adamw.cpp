#include "kernels/adamw.hpp"

#include "framework/core/error.hpp"

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
#pragma omp parallel for simd schedule(static)
    for (index_t i = 0; i < n; ++i) adamw_element(param[i], m[i], v[i], grad[i], lr, b1, b2, eps, wd, bc1, bc2);
}

template void adamw_step<float>(float*, float*, float*, const float*, index_t, const AdamWHyper&, long);
template void adamw_step<double>(double*, double*, double*, const double*, index_t, const AdamWHyper&, long);

namespace {
// One call per run of contiguous chunks that agree on decay: each parameter
// tensor's elements in one parallel loop.
template <class T> void adamw(const KernelCall& c) {
    LEVERS_CHECK(c.t[3].dtype == c.t[0].dtype, "AdamW on the CPU takes {} gradients for {} parameters, not {}",
                 name_of(c.t[0].dtype), name_of(c.t[0].dtype), name_of(c.t[3].dtype));
    const auto* chunks = reinterpret_cast<const AdamWChunk*>(c.t[4].data);
    const index_t n_chunks = c.t[4].numel() / 4;
    AdamWHyper h{c.f[0], c.f[1], c.f[2], c.f[3], 0};
    T *p = c.t[0].as<T>(), *m = c.t[1].as<T>(), *v = c.t[2].as<T>();
    const T* g = c.t[3].as<T>();
    for (index_t i = 0; i < n_chunks;) {
        const std::int64_t start = chunks[i].start;
        std::int64_t end = start + chunks[i].count;
        const std::int32_t decay = chunks[i].decay;
        for (++i; i < n_chunks && chunks[i].start == end && chunks[i].decay == decay; ++i) end += chunks[i].count;
        h.weight_decay = decay ? c.f[4] : 0.0;
        adamw_step(p + start, m + start, v + start, g + start, end - start, h, static_cast<long>(c.i[0]));
    }
}
LEVERS_KERNEL(adamw, cpu, f32, adamw<float>);
LEVERS_KERNEL(adamw, cpu, f64, adamw<double>);
}  // namespace

}  // namespace cpu
}  // namespace levers::kernels
