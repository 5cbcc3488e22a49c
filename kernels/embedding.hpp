// embedding: out[b, t] = wte[tokens[b, t]] + wpe[t] (token plus learned position).
// Conventions as in linear.hpp.
#pragma once

#include "kernels/common.hpp"

namespace levers::kernels::cpu {

// out[B, T, C]; tokens[B, T] each in [0, vocab) (checked: a bad id throws
// levers::Error naming it); wte[vocab, C]; wpe[>= T, C].
template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, index_t batch, index_t time,
                       index_t channels, index_t vocab);

// d_wte[tokens[b, t]] += d_out[b, t]; d_wpe[t] += d_out[b, t] (either may be null).
template <class T>
void embedding_backward(T* d_wte, T* d_wpe, const T* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels);

}  // namespace levers::kernels::cpu
