#include "levers/kernels/rmsnorm.hpp"

namespace levers::kernels::cpu {

namespace {

template <class T> void rmsnorm(const RmsNormCall& c) {
    const index_t channels = c.x.shape.last(), rows = c.x.shape.rows();
    T* out = c.out.as<T>();
    T* rstd = c.rstd.as<T>();
    const T *x = c.x.as<T>(), *w = c.weight.as<T>();
    const T eps = static_cast<T>(c.eps);
#pragma omp parallel for schedule(static)
    for (index_t r = 0; r < rows; ++r) {
        const T* xr = x + r * channels;
        const T rs = rmsnorm_row_rstd<T>(xr, channels, eps);
        T* o = out + r * channels;
        for (index_t k = 0; k < channels; ++k) o[k] = xr[k] * rs * w[k];
        rstd[r] = rs;
    }
}

template <class T> void rmsnorm_grad(const RmsNormBackwardCall& c) {
    const index_t channels = c.x.shape.last(), rows = c.x.shape.rows();
    const T *g = c.d_out.as<T>(), *x = c.x.as<T>(), *rstd = c.rstd.as<T>(), *w = c.weight.as<T>();
    T* d_x = c.d_x.as<T>();
#pragma omp parallel for schedule(static)
    for (index_t r = 0; r < rows; ++r)
        rmsnorm_row_backward(d_x + r * channels, g + r * channels, x + r * channels, w, rstd[r], channels);
    // The weight's gradient: a column sum over rows (in row order), cheap next to the row work.
    if (T* d_w = c.d_weight.as<T>())
        for (index_t r = 0; r < rows; ++r)
            for (index_t k = 0; k < channels; ++k) d_w[k] += g[r * channels + k] * x[r * channels + k] * rstd[r];
}

LEVERS_KERNEL(RmsNormCall, cpu, f32, rmsnorm<float>);
LEVERS_KERNEL(RmsNormCall, cpu, f64, rmsnorm<double>);
LEVERS_KERNEL(RmsNormBackwardCall, cpu, f32, rmsnorm_grad<float>);
LEVERS_KERNEL(RmsNormBackwardCall, cpu, f64, rmsnorm_grad<double>);

}  // namespace

}  // namespace levers::kernels::cpu
