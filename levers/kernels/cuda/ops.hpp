// The CUDA versions of the ops, with the CPU versions' signatures and gradient
// conventions (levers/kernels/<op>.hpp): pointers are device memory, each call is
// queued on `stream` and returns at once. Every op is instantiated for
// storage types S = float, double and bf16; arithmetic runs in acc_t<S>
// (float for float and bf16, double for double), so bf16 keeps only the
// storage narrow. Row statistics (layernorm's mean and rstd, cross-entropy's
// log-sum-exp) are kept in acc_t<S>. CUDA builds only.
#pragma once

#include "levers/kernels/adamw.hpp"
#include "levers/kernels/causal_attention.hpp"
#include "levers/kernels/common.hpp"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace levers::kernels::cuda {

using bf16 = __nv_bfloat16;
template <class S> struct Accumulator { using type = float; };
template <> struct Accumulator<double> { using type = double; };
template <> struct Accumulator<std::int32_t> { using type = std::int32_t; };  // integers and masks compute as they are
template <> struct Accumulator<bool> { using type = bool; };
template <class S> using acc_t = typename Accumulator<S>::type;

template <class S> void gelu_forward(S* out, const S* in, index_t n, cudaStream_t stream);
template <class S> void gelu_backward(S* d_in, const S* d_out, const S* in, index_t n, cudaStream_t stream);
template <class S> void scale(S* x, acc_t<S> s, index_t n, cudaStream_t stream);  // x *= s
// to[i] = from[i], rounded to nearest where `To` is narrower.
template <class To, class From> void convert(To* to, const From* from, index_t n, cudaStream_t stream);

// AdamW over a whole flat parameter buffer in one launch: one thread block
// per chunk (made by levers/kernels/adamw.hpp's append_adamw_chunks; the table in
// device memory).
// Parameters and moments in T (the fp32 master weights), gradients in G.
template <class T, class G>
void adamw_step(T* param, T* m, T* v, const G* grad, const AdamWChunk* chunks, index_t n_chunks, const AdamWHyper& h,
                long step, cudaStream_t stream);

// Through cuBLAS (the calling thread's handle, on `stream`; bf16 products
// accumulate in fp32); the layouts of levers/kernels/linear.hpp: weight
// [out_dim, in_dim], d_weight and d_bias added to, d_in written, each skipped
// if null. `out_ld` (0: out_dim): how far apart rows of out and d_out are, for
// a layer without bias whose output rows are padded (the GPT's logits, so
// bf16 products keep aligned strides with a vocabulary of 50257).
template <class S>
void linear_forward(S* out, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim, index_t out_dim,
                    cudaStream_t stream, index_t out_ld = 0);
// A layer followed by GELU (the GPT's c_fc, the MLP's hidden layers), in bf16
// one cuBLASLt call where its epilogues allow:
// pre = in·Wᵀ + bias (kept for backward), out = gelu(pre). The same results as
// linear_forward then gelu_forward, which is what runs elsewhere.
template <class S>
void linear_gelu_forward(S* out, S* pre, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim,
                         index_t out_dim, cudaStream_t stream);
template <class S>
void linear_backward(S* d_in, S* d_weight, S* d_bias, const S* d_out, const S* in, const S* weight, index_t n,
                     index_t in_dim, index_t out_dim, cudaStream_t stream, index_t out_ld = 0);
// The backward of a layer whose input `in` = gelu(pre) (the GPT's MLP
// projection after c_fc): d_pre = (d_out · W) ⊙ gelu'(pre), the gradient at
// GELU's input, and d_weight, d_bias added to as linear_backward does. In
// bf16 one cuBLASLt product whose epilogue applies GELU's derivative where
// it can; elsewhere linear_backward then gelu_backward, the same results.
template <class S>
void linear_gelu_backward(S* d_pre, S* d_weight, S* d_bias, const S* d_out, const S* in, const S* pre,
                          const S* weight, index_t n, index_t in_dim, index_t out_dim, cudaStream_t stream);

// Attention as batched GEMMs per batch row (heads strided) and a causal
// softmax kernel (one warp per row); the layouts of levers/kernels/attention.hpp.
template <class S>
void attention_forward(S* y, S* att, const S* qkv, index_t batch, index_t time, index_t channels, index_t heads,
                       cudaStream_t stream);
template <class S>
void attention_backward(S* d_qkv, const S* d_y, const S* att, const S* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads, cudaStream_t stream);

// Causal attention without the [T, T] matrices (flash-style, tensor cores;
// flash_attention.cu) for bf16 with head size 64 or 128: GPT-2's packed qkv
// where attention_fused_supported() (forward saves each query row's
// log-sum-exp in lse [batch·heads·time]; backward writes all of d_qkv), and
// the grouped-query attention of levers/kernels/causal_attention.hpp (any row
// strides the problem names, every row 16-byte aligned; d_q, d_k and d_v
// contiguous, written).
bool attention_fused_supported(index_t channels, index_t heads);
void attention_fused_forward(bf16* y, float* lse, const bf16* qkv, index_t batch, index_t time, index_t channels,
                             index_t heads, cudaStream_t stream);
void attention_fused_backward(bf16* d_qkv, const bf16* d_y, const bf16* y, const float* lse, const bf16* qkv,
                              index_t batch, index_t time, index_t channels, index_t heads, cudaStream_t stream);
bool causal_attention_supported(index_t head_dim);
void causal_attention_forward(bf16* y, float* lse, const bf16* q, const bf16* k, const bf16* v,
                              const CausalProblem& p, cudaStream_t stream);
void causal_attention_backward(bf16* d_q, bf16* d_k, bf16* d_v, const bf16* d_y, const bf16* y, const float* lse,
                               const bf16* q, const bf16* k, const bf16* v, const CausalProblem& p,
                               cudaStream_t stream);

// Token ids are not checked on the GPU: callers validate them on the host.
template <class S>
void embedding_forward(S* out, const std::int32_t* tokens, const S* wte, const S* wpe, index_t batch, index_t time,
                       index_t channels, cudaStream_t stream);
template <class S>
void embedding_backward(S* d_wte, S* d_wpe, const S* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels, cudaStream_t stream);

// LoRA (levers/kernels/lora.hpp): u = in·Aᵀ, out += scale·u·Bᵀ; backward adds into
// d_a, d_b and d_in (skipped if null), du is scratch [n, rank].
template <class S>
void lora_forward(S* out, S* u, const S* in, const S* a, const S* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, acc_t<S> scale, cudaStream_t stream);
template <class S>
void lora_backward(S* d_in, S* d_a, S* d_b, S* du, const S* d_out, const S* in, const S* u, const S* a, const S* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, acc_t<S> scale, cudaStream_t stream);

// Global-norm clipping; returns the norm before clipping (waits for the
// stream). The sum of squares runs in double, in a fixed order.
template <class S> double clip_grad_norm(S* grad, index_t n, double max_norm, cudaStream_t stream);

// One warp per row; the weight and bias gradients are summed per block of
// rows as backward goes, then over the blocks in a fixed order (no atomics:
// the same sums every run).
template <class S>
void layernorm_forward(S* out, acc_t<S>* mean, acc_t<S>* rstd, const S* x, const S* weight, const S* bias,
                       index_t rows, index_t channels, cudaStream_t stream, acc_t<S> eps = acc_t<S>(1e-5));
template <class S>
void layernorm_backward(S* d_x, S* d_weight, S* d_bias, const S* d_out, const S* x, const acc_t<S>* mean,
                        const acc_t<S>* rstd, const S* weight, index_t rows, index_t channels, cudaStream_t stream);

// Softmax cross-entropy that never materialises probabilities beyond the
// logits, one thread block per row: forward keeps one log-sum-exp per row
// and writes the mean over counted rows into `loss` (one element, device);
// backward overwrites the logits' rows with their gradient (d_logits may be
// the logits themselves). `stride` (0: vocab): how far apart rows are.
// Targets live on the GPU, so the caller checks them on the host (the CPU
// op's rule: in [0, vocab) or ignore_index); rows with other targets are
// left out of both passes, like ignored ones.
template <class S>
void cross_entropy_forward(acc_t<S>* loss, acc_t<S>* lse, const S* logits, const std::int32_t* targets, index_t rows,
                           index_t vocab, cudaStream_t stream, std::int32_t ignore_index = -100, index_t stride = 0);
template <class S>
void cross_entropy_backward(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                            acc_t<S> d_loss, index_t rows, index_t vocab, cudaStream_t stream,
                            std::int32_t ignore_index = -100, index_t stride = 0);

}  // namespace levers::kernels::cuda
