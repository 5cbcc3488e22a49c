// Causal multi-head self-attention on a fused qkv input (GPT-2's c_attn output).
//
// qkv[B, T, 3C] holds q | k | v along the last axis; head h uses channels
// [h·D, (h+1)·D) of each, D = C / H. y[B, T, C] = softmax(q kᵀ / √D, causal) v,
// heads side by side. The probabilities att[B, H, T, T] are saved for backward
// (entries above the diagonal are zero). Conventions as in linear.hpp.
#pragma once

#include "kernels/common.hpp"

#include <cmath>

namespace levers::kernels {

// Turns scores p[0..=i] into probabilities in place and zeroes p[i+1..len).
template <class T> LEVERS_HD void causal_softmax_row(T* p, index_t i, index_t len) {
    T m = p[0];
    for (index_t j = 1; j <= i; ++j) m = p[j] > m ? p[j] : m;
    T s = 0;
    for (index_t j = 0; j <= i; ++j) {
        p[j] = std::exp(p[j] - m);
        s += p[j];
    }
    T inv = T(1) / s;
    for (index_t j = 0; j <= i; ++j) p[j] *= inv;
    for (index_t j = i + 1; j < len; ++j) p[j] = 0;
}

// Softmax backward for one row: d_s[j] = p[j] · (d_p[j] - Σ_k p[k] d_p[k]).
// d_s may alias d_p.
template <class T> LEVERS_HD void softmax_row_backward(T* d_s, const T* p, const T* d_p, index_t len) {
    T dot = 0;
    for (index_t j = 0; j < len; ++j) dot += p[j] * d_p[j];
    for (index_t j = 0; j < len; ++j) d_s[j] = p[j] * (d_p[j] - dot);
}

namespace cpu {

template <class T>
void attention_forward(T* y, T* att, const T* qkv, index_t batch, index_t time, index_t channels, index_t heads);

// d_qkv written (all of q, k and v parts).
template <class T>
void attention_backward(T* d_qkv, const T* d_y, const T* att, const T* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads);

}  // namespace cpu
}  // namespace levers::kernels
