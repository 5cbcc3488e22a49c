// linear: out = in · weightᵀ + bias, weight stored [out_dim, in_dim] (PyTorch's
// nn.Linear layout, so a GPT's tied embedding can serve as its output weight).
//
// Conventions of every op: arguments are outputs, saved state, inputs,
// parameters, sizes. Backward *writes* activation gradients and *adds* into
// parameter gradients.
#pragma once

#include "kernels/common.hpp"

namespace levers::kernels::cpu {

// out[n, out_dim] = in[n, in_dim] · weight[out_dim, in_dim]ᵀ + bias[out_dim] (bias may be null).
template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, index_t n, index_t in_dim,
                    index_t out_dim);

// d_in = d_out · weight (written), d_weight += d_outᵀ · in, d_bias += column
// sums of d_out; each skipped if null (a frozen layer needs only d_in).
template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight, index_t n,
                     index_t in_dim, index_t out_dim);

}  // namespace levers::kernels::cpu
