// Causal self-attention as batched GEMMs per batch row (heads strided) and
// softmax kernels of one warp per row; the layouts of levers/kernels/attention.hpp.
#include "levers/kernels/attention.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/blas.cuh"
#include "levers/kernels/cuda/device_math.cuh"

#include <cmath>

namespace levers::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

// Row r of [rows, time] is query position r % time: softmax over keys
// 0..that position, zeros after it (the CPU's causal_softmax_row).
template <class S> __global__ void causal_softmax_kernel(S* att, index_t rows, index_t time) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    S* p = att + r * time;
    const index_t last = r % time;
    A m = -INFINITY;
    for (index_t j = lane; j <= last; j += 32) m = fmax(m, static_cast<A>(load(p[j])));
    m = warp_max(m);
    A s = 0;
    for (index_t j = lane; j <= last; j += 32) s += exp(load(p[j]) - m);
    const A inv = A(1) / warp_sum(s);
    for (index_t j = lane; j < time; j += 32) p[j] = store<S>(j <= last ? exp(load(p[j]) - m) * inv : A(0));
}

// d_s[j] = p[j] · (d_p[j] - Σ_k p[k] d_p[k]), in place over d_p.
template <class S> __global__ void softmax_backward_kernel(S* d, const S* att, index_t rows, index_t time) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const S* p = att + r * time;
    S* dp = d + r * time;
    A dot = 0;
    for (index_t j = lane; j < time; j += 32) dot += load(p[j]) * load(dp[j]);
    dot = warp_sum(dot);
    for (index_t j = lane; j < time; j += 32) dp[j] = store<S>(load(p[j]) * (load(dp[j]) - dot));
}

}  // namespace

template <class S>
void attention_forward(S* y, S* att, const S* qkv, index_t batch, index_t time, index_t channels, index_t heads,
                       cudaStream_t stream) {
    using A = acc_t<S>;
    const index_t d = channels / heads, row = 3 * channels;
    const A scale = A(1) / std::sqrt(static_cast<A>(d));
    for (index_t b = 0; b < batch; ++b) {
        const S* q = qkv + b * time * row;
        S* p = att + b * heads * time * time;
        // Scores per head: S[T, T] = scale · Q Kᵀ.
        gemm<S>(stream, CUBLAS_OP_T, CUBLAS_OP_N, time, time, d, scale, q + channels, row, d, q, row, d, 0, p, time,
                time * time, static_cast<int>(heads));
    }
    const index_t rows = batch * heads * time;
    LEVERS_LAUNCH(causal_softmax_kernel<<<blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(
        att, rows, time));
    for (index_t b = 0; b < batch; ++b) {
        const S* v = qkv + b * time * row + 2 * channels;
        // Y[T, D] = P · V per head, written into the head's channels of y.
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_N, d, time, time, 1, v, row, d, att + b * heads * time * time, time,
                time * time, 0, y + b * time * channels, channels, d, static_cast<int>(heads));
    }
}

template <class S>
void attention_backward(S* d_qkv, const S* d_y, const S* att, const S* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads, cudaStream_t stream) {
    using A = acc_t<S>;
    const index_t d = channels / heads, row = 3 * channels;
    const A scale = A(1) / std::sqrt(static_cast<A>(d));
    Scratch<S> d_s(static_cast<std::size_t>(batch * heads * time * time));  // dP, then dS in place
    for (index_t b = 0; b < batch; ++b) {
        const S* base = qkv + b * time * row;
        const S* dy = d_y + b * time * channels;
        const S* p = att + b * heads * time * time;
        S* ds = d_s.get() + b * heads * time * time;
        S* dq = d_qkv + b * time * row;
        // dP = dY · Vᵀ.
        gemm<S>(stream, CUBLAS_OP_T, CUBLAS_OP_N, time, time, d, 1, base + 2 * channels, row, d, dy, channels, d, 0,
                ds, time, time * time, static_cast<int>(heads));
        // dV = Pᵀ · dY.
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_T, d, time, time, 1, dy, channels, d, p, time, time * time, 0,
                dq + 2 * channels, row, d, static_cast<int>(heads));
    }
    const index_t rows = batch * heads * time;
    LEVERS_LAUNCH(softmax_backward_kernel<<<blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(
        d_s.get(), att, rows, time));
    for (index_t b = 0; b < batch; ++b) {
        const S* base = qkv + b * time * row;
        const S* ds = d_s.get() + b * heads * time * time;
        S* dq = d_qkv + b * time * row;
        // dQ = scale · dS · K;  dK = scale · dSᵀ · Q.
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_N, d, time, time, scale, base + channels, row, d, ds, time, time * time,
                0, dq, row, d, static_cast<int>(heads));
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_T, d, time, time, scale, base, row, d, ds, time, time * time, 0,
                dq + channels, row, d, static_cast<int>(heads));
    }
}

#define LEVERS_ATTENTION(S)                                                                                    \
    template void attention_forward<S>(S*, S*, const S*, index_t, index_t, index_t, index_t, cudaStream_t);    \
    template void attention_backward<S>(S*, const S*, const S*, const S*, index_t, index_t, index_t, index_t, \
                                        cudaStream_t);
LEVERS_ATTENTION(float)
LEVERS_ATTENTION(double)
LEVERS_ATTENTION(bf16)

namespace {
template <class S> void attention_call(const AttentionCall& c) {
    const auto& q = c.qkv.shape;
    attention_forward(ptr<S>(c.y), ptr<S>(c.att), ptr<const S>(c.qkv), q[0], q[1], q[2] / 3, c.heads, stream_of(c));
}
template <class S> void attention_grad_call(const AttentionBackwardCall& c) {
    const auto& q = c.qkv.shape;
    attention_backward(ptr<S>(c.d_qkv), ptr<const S>(c.d_y), ptr<const S>(c.att), ptr<const S>(c.qkv), q[0], q[1],
                       q[2] / 3, c.heads, stream_of(c));
}
LEVERS_CUDA_KERNELS(AttentionCall, attention_call);
LEVERS_CUDA_KERNELS(AttentionBackwardCall, attention_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
