// LoRA (Hu et al., 2021): a frozen linear layer W gains a trainable low-rank
// update, out += scale · (in · Aᵀ) · Bᵀ with A [rank, in_dim], B [out_dim, rank]
// (nn.Linear layouts) and scale = alpha / rank. B starts at zero, so training
// starts from the frozen model exactly.
//
// Conventions as in linear.hpp, except that backward *adds* into d_in: the
// frozen layer's own backward has already written it.
#pragma once

#include "kernels/common.hpp"

namespace levers::kernels::cpu {

// u[n, rank] = in · Aᵀ (saved for backward); out[n, out_dim] += scale · u · Bᵀ.
template <class T>
void lora_forward(T* out, T* u, const T* in, const T* a, const T* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, T scale);

// du[n, rank] is scratch. d_b += scale · d_outᵀ · u; du = scale · d_out · B;
// d_a += duᵀ · in; d_in += du · A (skipped if null).
template <class T>
void lora_backward(T* d_in, T* d_a, T* d_b, T* du, const T* d_out, const T* in, const T* u, const T* a, const T* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, T scale);

// W[out_dim, in_dim] += scale · B · A: the adapter folded into the frozen weight.
template <class T>
void lora_merge(T* weight, const T* a, const T* b, index_t in_dim, index_t out_dim, index_t rank, T scale);

}  // namespace levers::kernels::cpu
