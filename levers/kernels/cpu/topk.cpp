#include "levers/kernels/topk.hpp"

namespace levers::kernels::cpu {

namespace {
template <class T> void topk(const TopkCall& c) {
    const index_t rows = c.in.shape[0], cols = c.in.shape[1], k = c.index.shape[1];
    const T* in = c.in.as<T>();
    std::int32_t* index = c.index.as<std::int32_t>();
#pragma omp parallel for schedule(static) if (rows * cols * k > 65536)
    for (index_t r = 0; r < rows; ++r) topk_row(index + r * k, in + r * cols, cols, k, [](T v) { return v; });
}
LEVERS_KERNEL(TopkCall, cpu, f32, topk<float>);
LEVERS_KERNEL(TopkCall, cpu, f64, topk<double>);
}  // namespace

}  // namespace levers::kernels::cpu
