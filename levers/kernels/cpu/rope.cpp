#include "levers/kernels/rope.hpp"

namespace levers::kernels::cpu {

namespace {

template <class T> void rope(const RopeCall& c) {
    const index_t batch = c.x.shape[0], time = c.x.shape[1], heads = c.x.shape[2], d = c.x.shape[3], half = d / 2;
    const bool batched = c.cos.shape.ndim() == 3;
    const T *x = c.x.as<T>(), *cos = c.cos.as<T>(), *sin = c.sin.as<T>();
    T* out = c.out.as<T>();
#pragma omp parallel for collapse(2) schedule(static)
    for (index_t b = 0; b < batch; ++b)
        for (index_t t = 0; t < time; ++t) {
            const index_t row = (batched ? b * time + t : t) * d;
            for (index_t h = 0; h < heads; ++h) {
                const index_t at = ((b * time + t) * heads + h) * d;
                for (index_t i = 0; i < half; ++i)
                    rope_pair(out[at + i], out[at + i + half], x[at + i], x[at + i + half], cos[row + i], sin[row + i],
                              c.inverse);
            }
        }
}

LEVERS_KERNEL(RopeCall, cpu, f32, rope<float>);
LEVERS_KERNEL(RopeCall, cpu, f64, rope<double>);

}  // namespace

}  // namespace levers::kernels::cpu
