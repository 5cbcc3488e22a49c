// The CUDA versions of the ops, with the CPU versions' signatures and gradient
// conventions (kernels/<op>.hpp): pointers are device memory, each call is
// queued on `stream` and returns at once. They run the same per-element and
// per-row maths (LEVERS_HD) the CPU kernels run, so parity tests compare like
// with like. CUDA builds only.
#pragma once

#include "kernels/adamw.hpp"
#include "kernels/common.hpp"

#include <cuda_runtime.h>

#include <cstdint>

namespace levers::kernels::cuda {

template <class T> void gelu_forward(T* out, const T* in, index_t n, cudaStream_t stream);
template <class T> void gelu_backward(T* d_in, const T* d_out, const T* in, index_t n, cudaStream_t stream);
template <class T> void residual_forward(T* out, const T* a, const T* b, index_t n, cudaStream_t stream);
template <class T> void scale(T* x, T s, index_t n, cudaStream_t stream);  // x *= s
// AdamW on n elements in one kernel (the moments and the update fused).
template <class T>
void adamw_step(T* param, T* m, T* v, const T* grad, index_t n, const AdamWHyper& h, long step, cudaStream_t stream);

// Through cuBLAS (the calling thread's handle, on `stream`); the layouts of
// kernels/linear.hpp: weight [out_dim, in_dim], d_weight and d_bias added to,
// d_in written, each skipped if null.
template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, index_t n, index_t in_dim, index_t out_dim,
                    cudaStream_t stream);
template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight, index_t n,
                     index_t in_dim, index_t out_dim, cudaStream_t stream);

// Attention as batched GEMMs per batch row (heads strided) and a causal
// softmax kernel; the layouts of kernels/attention.hpp.
template <class T>
void attention_forward(T* y, T* att, const T* qkv, index_t batch, index_t time, index_t channels, index_t heads,
                       cudaStream_t stream);
template <class T>
void attention_backward(T* d_qkv, const T* d_y, const T* att, const T* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads, cudaStream_t stream);

// Token ids are not checked on the card: callers validate them on the host.
template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, index_t batch, index_t time,
                       index_t channels, cudaStream_t stream);
template <class T>
void embedding_backward(T* d_wte, T* d_wpe, const T* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels, cudaStream_t stream);

// LoRA (kernels/lora.hpp): u = in·Aᵀ, out += scale·u·Bᵀ; backward adds into
// d_a, d_b and d_in (skipped if null), du is scratch [n, rank].
template <class T>
void lora_forward(T* out, T* u, const T* in, const T* a, const T* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, T scale, cudaStream_t stream);
template <class T>
void lora_backward(T* d_in, T* d_a, T* d_b, T* du, const T* d_out, const T* in, const T* u, const T* a, const T* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, T scale, cudaStream_t stream);

// Global-norm clipping; returns the norm before clipping (waits for the stream).
template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm, cudaStream_t stream);

// One thread block per row.
template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                       index_t channels, cudaStream_t stream, T eps = T(1e-5));
template <class T>
void layernorm_backward(T* d_x, T* d_weight, T* d_bias, const T* d_out, const T* x, const T* mean, const T* rstd,
                        const T* weight, index_t rows, index_t channels, cudaStream_t stream);

// Softmax cross-entropy that never materialises probabilities beyond the
// logits: forward keeps one log-sum-exp per row; backward writes the gradient
// over the logits. `loss` (one element, device) receives the mean over
// counted rows; `counted` (device) their number.
template <class T>
void cross_entropy_forward(T* loss, T* lse, const T* logits, const std::int32_t* targets, index_t rows, index_t vocab,
                           cudaStream_t stream, std::int32_t ignore_index = -100);
template <class T>
void cross_entropy_backward(T* d_logits, const T* lse, const T* logits, const std::int32_t* targets, T d_loss,
                            index_t rows, index_t vocab, cudaStream_t stream, std::int32_t ignore_index = -100);

}  // namespace levers::kernels::cuda
