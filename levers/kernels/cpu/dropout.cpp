#include "levers/kernels/dropout.hpp"

namespace levers::kernels::cpu {

template <class T> void dropout_forward(T* out, const T* in, index_t n, std::uint64_t key, float p) {
    const T scale = T(1) / (T(1) - static_cast<T>(p));
#pragma omp parallel for schedule(static)
    for (index_t i = 0; i < n; ++i) out[i] = dropout_keeps(key, i, p) ? in[i] * scale : T(0);
}

template void dropout_forward<float>(float*, const float*, index_t, std::uint64_t, float);
template void dropout_forward<double>(double*, const double*, index_t, std::uint64_t, float);

namespace {
template <class T> void dropout(const DropoutCall& c) {
    dropout_forward(c.out.as<T>(), c.in.as<T>(), c.in.numel(), c.key, static_cast<float>(c.p));
}
LEVERS_KERNEL(DropoutCall, cpu, f32, dropout<float>);
LEVERS_KERNEL(DropoutCall, cpu, f64, dropout<double>);
}  // namespace

}  // namespace levers::kernels::cpu
