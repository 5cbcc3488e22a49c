// layernorm over the last dimension: out = (x - mean) * rstd * weight + bias.
// Conventions as in linear.hpp. The per-row maths is shared with the CUDA kernel.
#pragma once

#include "kernels/common.hpp"

#include <cmath>

namespace levers::kernels {

// One row of the forward: writes out[0..C) and this row's mean and rstd.
template <class T>
LEVERS_HD void layernorm_row_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias,
                                     index_t channels, T eps) {
    T m = 0;
    for (index_t c = 0; c < channels; ++c) m += x[c];
    m /= static_cast<T>(channels);
    T var = 0;
    for (index_t c = 0; c < channels; ++c) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<T>(channels);
    T r = T(1) / std::sqrt(var + eps);
    for (index_t c = 0; c < channels; ++c) out[c] = (x[c] - m) * r * weight[c] + bias[c];
    *mean = m;
    *rstd = r;
}

// One row of the backward: writes d_x[0..C). (Weight and bias gradients are
// sums over rows and are reduced separately.)
template <class T>
LEVERS_HD void layernorm_row_backward(T* d_x, const T* d_out, const T* x, const T* weight, T mean, T rstd,
                                      index_t channels) {
    T mean_dxhat = 0, mean_dxhat_xhat = 0;
    for (index_t c = 0; c < channels; ++c) {
        T dxhat = d_out[c] * weight[c];
        mean_dxhat += dxhat;
        mean_dxhat_xhat += dxhat * (x[c] - mean) * rstd;
    }
    mean_dxhat /= static_cast<T>(channels);
    mean_dxhat_xhat /= static_cast<T>(channels);
    for (index_t c = 0; c < channels; ++c) {
        T xhat = (x[c] - mean) * rstd;
        d_x[c] = rstd * (d_out[c] * weight[c] - mean_dxhat - xhat * mean_dxhat_xhat);
    }
}

namespace cpu {

// out[rows, C], mean[rows], rstd[rows] (saved for backward); x[rows, C]; weight[C], bias[C].
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                       index_t channels, T eps = T(1e-5));

// d_x written; d_weight, d_bias added to (both skipped if d_weight is null: frozen).
template <class T>
void layernorm_backward(T* d_x, T* d_weight, T* d_bias, const T* d_out, const T* x, const T* mean, const T* rstd,
                        const T* weight, index_t rows, index_t channels);

}  // namespace cpu
}  // namespace levers::kernels
