#include "levers/kernels/layernorm.hpp"

namespace levers::kernels::cpu {

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                       index_t channels, T eps) {
#pragma omp parallel for schedule(static)
    for (index_t r = 0; r < rows; ++r)
        layernorm_row_forward(out + r * channels, mean + r, rstd + r, x + r * channels, weight, bias, channels, eps);
}

template <class T>
void layernorm_backward(T* d_x, T* d_weight, T* d_bias, const T* d_out, const T* x, const T* mean, const T* rstd,
                        const T* weight, index_t rows, index_t channels) {
#pragma omp parallel for schedule(static)
    for (index_t r = 0; r < rows; ++r)
        layernorm_row_backward(d_x + r * channels, d_out + r * channels, x + r * channels, weight, mean[r], rstd[r],
                               channels);
    // Parameter gradients: a column reduction over rows, cheap next to the row work.
    for (index_t r = 0; r < rows; ++r) {
        const T* g = d_out + r * channels;
        const T* xr = x + r * channels;
        if (d_weight)
            for (index_t c = 0; c < channels; ++c) d_weight[c] += g[c] * (xr[c] - mean[r]) * rstd[r];
        if (d_bias)
            for (index_t c = 0; c < channels; ++c) d_bias[c] += g[c];
    }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, index_t,
                                       index_t, float);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                        index_t, index_t, double);
template void layernorm_backward<float>(float*, float*, float*, const float*, const float*, const float*,
                                        const float*, const float*, index_t, index_t);
template void layernorm_backward<double>(double*, double*, double*, const double*, const double*, const double*,
                                         const double*, const double*, index_t, index_t);

namespace {
template <class T> void layernorm(const LayerNormCall& c) {
    const index_t channels = c.x.shape.last();
    layernorm_forward(c.out.as<T>(), c.mean.as<T>(), c.rstd.as<T>(), c.x.as<T>(), c.weight.as<T>(), c.bias.as<T>(),
                      c.x.shape.rows(), channels, static_cast<T>(c.eps));
}
template <class T> void layernorm_grad(const LayerNormBackwardCall& c) {
    const index_t channels = c.x.shape.last();
    layernorm_backward(c.d_x.as<T>(), c.d_weight.as<T>(), c.d_bias.as<T>(), c.d_out.as<T>(), c.x.as<T>(),
                       c.mean.as<T>(), c.rstd.as<T>(), c.weight.as<T>(), c.x.shape.rows(), channels);
}
LEVERS_KERNEL(LayerNormCall, cpu, f32, layernorm<float>);
LEVERS_KERNEL(LayerNormCall, cpu, f64, layernorm<double>);
LEVERS_KERNEL(LayerNormBackwardCall, cpu, f32, layernorm_grad<float>);
LEVERS_KERNEL(LayerNormBackwardCall, cpu, f64, layernorm_grad<double>);
}  // namespace

}  // namespace levers::kernels::cpu
