// The ops built on matrix products: linear and attention through cuBLAS
// (row-major arrays seen as their column-major transposes), plus the
// embedding and global-norm clipping.
#include "framework/core/cuda_check.hpp"
#include "kernels/attention.hpp"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/ops.hpp"

#include <cublas_v2.h>

#include <cmath>

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;
unsigned blocks_for(index_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

// The calling thread's cuBLAS handle, bound to `stream`.
cublasHandle_t blas(cudaStream_t stream) {
    thread_local cublasHandle_t handle = nullptr;
    if (!handle) LEVERS_CUBLAS_CHECK(cublasCreate(&handle));
    LEVERS_CUBLAS_CHECK(cublasSetStream(handle, stream));
    return handle;
}

// C = alpha · op(A) · op(B) + beta · C in cuBLAS's column-major terms, batched with strides.
template <class T>
void gemm(cudaStream_t s, cublasOperation_t ta, cublasOperation_t tb, index_t m, index_t n, index_t k, T alpha,
          const T* a, index_t lda, long long stride_a, const T* b, index_t ldb, long long stride_b, T beta, T* c,
          index_t ldc, long long stride_c, int count) {
    const auto im = static_cast<int>(m), in = static_cast<int>(n), ik = static_cast<int>(k);
    if constexpr (sizeof(T) == 4)
        LEVERS_CUBLAS_CHECK(cublasSgemmStridedBatched(blas(s), ta, tb, im, in, ik, &alpha, a, static_cast<int>(lda),
                                                      stride_a, b, static_cast<int>(ldb), stride_b, &beta, c,
                                                      static_cast<int>(ldc), stride_c, count));
    else
        LEVERS_CUBLAS_CHECK(cublasDgemmStridedBatched(blas(s), ta, tb, im, in, ik, &alpha, a, static_cast<int>(lda),
                                                      stride_a, b, static_cast<int>(ldb), stride_b, &beta, c,
                                                      static_cast<int>(ldc), stride_c, count));
}

template <class T> __global__ void add_bias_kernel(T* out, const T* bias, index_t n, index_t cols) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n * cols) out[i] += bias[i % cols];
}

// d_bias[c] += Σ_r d_out[r, c], one thread per column in row order.
template <class T> __global__ void bias_grad_kernel(T* d_bias, const T* d_out, index_t n, index_t cols) {
    const index_t c = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (c >= cols) return;
    T s = 0;
    for (index_t r = 0; r < n; ++r) s += d_out[r * cols + c];
    d_bias[c] += s;
}

// One thread per (batch, head, query row).
template <class T> __global__ void causal_softmax_kernel(T* att, index_t rows, index_t time) {
    const index_t r = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (r < rows) causal_softmax_row(att + r * time, r % time, time);
}

template <class T> __global__ void softmax_backward_kernel(T* d_s, const T* att, index_t rows, index_t time) {
    const index_t r = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (r < rows) softmax_row_backward(d_s + r * time, att + r * time, d_s + r * time, time);
}

template <class T>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, index_t bt,
                                         index_t time, index_t c) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= bt * c) return;
    const index_t row = i / c, ch = i % c;
    out[i] = wte[static_cast<index_t>(tokens[row]) * c + ch] + wpe[(row % time) * c + ch];
}

// Gradients of the token table gather per position, so one thread per channel
// walks the positions in order: no atomics, the same sums every run.
template <class T>
__global__ void embedding_backward_kernel(T* d_wte, T* d_wpe, const T* d_out, const std::int32_t* tokens, index_t batch,
                                          index_t time, index_t c) {
    const index_t ch = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (ch >= c) return;
    for (index_t b = 0; b < batch; ++b)
        for (index_t t = 0; t < time; ++t) {
            const T g = d_out[(b * time + t) * c + ch];
            if (d_wte) d_wte[static_cast<index_t>(tokens[b * time + t]) * c + ch] += g;
            if (d_wpe) d_wpe[t * c + ch] += g;
        }
}

// One block: Σ g² in double.
template <class T> __global__ void sum_squares_kernel(double* out, const T* g, index_t n) {
    double s = 0;
    for (index_t i = threadIdx.x; i < n; i += blockDim.x) s += static_cast<double>(g[i]) * static_cast<double>(g[i]);
    const double total = block_sum<kThreads>(s);
    if (threadIdx.x == 0) *out = total;
}

template <class T> __global__ void scale_kernel(T* g, index_t n, T s) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) g[i] *= s;
}

}  // namespace

template <class T>
void linear_forward(T* out, const T* in, const T* weight, const T* bias, index_t n, index_t in_dim, index_t out_dim,
                    cudaStream_t stream) {
    // out[n, out] = in[n, in] · Wᵀ: column-major out' = W'ᵀ(op T) · in'(op N).
    gemm<T>(stream, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, n, in_dim, T(1), weight, in_dim, 0, in, in_dim, 0, T(0), out,
            out_dim, 0, 1);
    if (bias) {
        add_bias_kernel<<<blocks_for(n * out_dim), kThreads, 0, stream>>>(out, bias, n, out_dim);
        LEVERS_CUDA_CHECK(cudaGetLastError());
    }
}

template <class T>
void linear_backward(T* d_in, T* d_weight, T* d_bias, const T* d_out, const T* in, const T* weight, index_t n,
                     index_t in_dim, index_t out_dim, cudaStream_t stream) {
    // d_in[n, in] = d_out[n, out] · W[out, in].
    if (d_in)
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, n, out_dim, T(1), weight, in_dim, 0, d_out, out_dim, 0, T(0),
                d_in, in_dim, 0, 1);
    // d_W[out, in] += d_outᵀ · in.
    if (d_weight)
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, out_dim, n, T(1), in, in_dim, 0, d_out, out_dim, 0, T(1),
                d_weight, in_dim, 0, 1);
    if (d_bias) {
        bias_grad_kernel<<<blocks_for(out_dim), kThreads, 0, stream>>>(d_bias, d_out, n, out_dim);
        LEVERS_CUDA_CHECK(cudaGetLastError());
    }
}

template <class T>
void attention_forward(T* y, T* att, const T* qkv, index_t batch, index_t time, index_t channels, index_t heads,
                       cudaStream_t stream) {
    const index_t d = channels / heads, row = 3 * channels;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    for (index_t b = 0; b < batch; ++b) {
        const T* q = qkv + b * time * row;
        T* p = att + b * heads * time * time;
        // Scores per head: S[T, T] = scale · Q Kᵀ.
        gemm<T>(stream, CUBLAS_OP_T, CUBLAS_OP_N, time, time, d, scale, q + channels, row, d, q, row, d, T(0), p, time,
                time * time, static_cast<int>(heads));
    }
    const index_t rows = batch * heads * time;
    causal_softmax_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(att, rows, time);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    for (index_t b = 0; b < batch; ++b) {
        const T* v = qkv + b * time * row + 2 * channels;
        // Y[T, D] = P · V per head, written into the head's channels of y.
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_N, d, time, time, T(1), v, row, d, att + b * heads * time * time, time,
                time * time, T(0), y + b * time * channels, channels, d, static_cast<int>(heads));
    }
}

template <class T>
void attention_backward(T* d_qkv, const T* d_y, const T* att, const T* qkv, index_t batch, index_t time,
                        index_t channels, index_t heads, cudaStream_t stream) {
    const index_t d = channels / heads, row = 3 * channels;
    const T scale = T(1) / std::sqrt(static_cast<T>(d));
    T* d_s = nullptr;  // dP, then dS in place
    const std::size_t bytes = static_cast<std::size_t>(batch * heads * time * time) * sizeof(T);
    LEVERS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&d_s), bytes, stream));
    for (index_t b = 0; b < batch; ++b) {
        const T* base = qkv + b * time * row;
        const T* dy = d_y + b * time * channels;
        const T* p = att + b * heads * time * time;
        T* ds = d_s + b * heads * time * time;
        T* dq = d_qkv + b * time * row;
        // dP = dY · Vᵀ.
        gemm<T>(stream, CUBLAS_OP_T, CUBLAS_OP_N, time, time, d, T(1), base + 2 * channels, row, d, dy, channels, d,
                T(0), ds, time, time * time, static_cast<int>(heads));
        // dV = Pᵀ · dY.
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_T, d, time, time, T(1), dy, channels, d, p, time, time * time, T(0),
                dq + 2 * channels, row, d, static_cast<int>(heads));
    }
    const index_t rows = batch * heads * time;
    softmax_backward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(d_s, att, rows, time);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    for (index_t b = 0; b < batch; ++b) {
        const T* base = qkv + b * time * row;
        const T* ds = d_s + b * heads * time * time;
        T* dq = d_qkv + b * time * row;
        // dQ = scale · dS · K;  dK = scale · dSᵀ · Q.
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_N, d, time, time, scale, base + channels, row, d, ds, time, time * time,
                T(0), dq, row, d, static_cast<int>(heads));
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_T, d, time, time, scale, base, row, d, ds, time, time * time, T(0),
                dq + channels, row, d, static_cast<int>(heads));
    }
    LEVERS_CUDA_CHECK(cudaFreeAsync(d_s, stream));
}

template <class T>
void embedding_forward(T* out, const std::int32_t* tokens, const T* wte, const T* wpe, index_t batch, index_t time,
                       index_t channels, cudaStream_t stream) {
    const index_t bt = batch * time;
    embedding_forward_kernel<<<blocks_for(bt * channels), kThreads, 0, stream>>>(out, tokens, wte, wpe, bt, time,
                                                                                 channels);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void embedding_backward(T* d_wte, T* d_wpe, const T* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels, cudaStream_t stream) {
    embedding_backward_kernel<<<blocks_for(channels), kThreads, 0, stream>>>(d_wte, d_wpe, d_out, tokens, batch, time,
                                                                             channels);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void lora_forward(T* out, T* u, const T* in, const T* a, const T* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, T scale, cudaStream_t stream) {
    // u[n, r] = in · Aᵀ (A [r, in]); out[n, out] += scale · u · Bᵀ (B [out, r]): linear_forward's pattern.
    gemm<T>(stream, CUBLAS_OP_T, CUBLAS_OP_N, rank, n, in_dim, T(1), a, in_dim, 0, in, in_dim, 0, T(0), u, rank, 0, 1);
    gemm<T>(stream, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, n, rank, scale, b, rank, 0, u, rank, 0, T(1), out, out_dim, 0,
            1);
}

template <class T>
void lora_backward(T* d_in, T* d_a, T* d_b, T* du, const T* d_out, const T* in, const T* u, const T* a, const T* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, T scale, cudaStream_t stream) {
    // d_b[out, r] += scale · d_outᵀ · u.
    gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_T, rank, out_dim, n, scale, u, rank, 0, d_out, out_dim, 0, T(1), d_b, rank,
            0, 1);
    // du[n, r] = scale · d_out · B.
    gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_N, rank, n, out_dim, scale, b, rank, 0, d_out, out_dim, 0, T(0), du, rank,
            0, 1);
    // d_a[r, in] += duᵀ · in.
    gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, rank, n, T(1), in, in_dim, 0, du, rank, 0, T(1), d_a, in_dim, 0,
            1);
    // d_in[n, in] += du · A.
    if (d_in)
        gemm<T>(stream, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, n, rank, T(1), a, in_dim, 0, du, rank, 0, T(1), d_in, in_dim,
                0, 1);
}

template <class T> double clip_grad_norm(T* grad, index_t n, double max_norm, cudaStream_t stream) {
    double* sum = nullptr;
    LEVERS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&sum), sizeof(double), stream));
    sum_squares_kernel<<<1, kThreads, 0, stream>>>(sum, grad, n);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    double host = 0;
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(&host, sum, sizeof(double), cudaMemcpyDeviceToHost, stream));
    LEVERS_CUDA_CHECK(cudaFreeAsync(sum, stream));
    LEVERS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double norm = std::sqrt(host);
    if (max_norm > 0 && norm > max_norm) {
        scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(grad, n, static_cast<T>(max_norm / (norm + 1e-6)));
        LEVERS_CUDA_CHECK(cudaGetLastError());
    }
    return norm;
}

#define LEVERS_MATMUL(T)                                                                                          \
    template void linear_forward<T>(T*, const T*, const T*, const T*, index_t, index_t, index_t, cudaStream_t);  \
    template void linear_backward<T>(T*, T*, T*, const T*, const T*, const T*, index_t, index_t, index_t,         \
                                     cudaStream_t);                                                              \
    template void attention_forward<T>(T*, T*, const T*, index_t, index_t, index_t, index_t, cudaStream_t);       \
    template void attention_backward<T>(T*, const T*, const T*, const T*, index_t, index_t, index_t, index_t,     \
                                        cudaStream_t);                                                           \
    template void embedding_forward<T>(T*, const std::int32_t*, const T*, const T*, index_t, index_t, index_t,    \
                                       cudaStream_t);                                                            \
    template void embedding_backward<T>(T*, T*, const T*, const std::int32_t*, index_t, index_t, index_t,         \
                                        cudaStream_t);                                                           \
    template double clip_grad_norm<T>(T*, index_t, double, cudaStream_t);                                        \
    template void lora_forward<T>(T*, T*, const T*, const T*, const T*, index_t, index_t, index_t, index_t, T,     \
                                  cudaStream_t);                                                                 \
    template void lora_backward<T>(T*, T*, T*, T*, const T*, const T*, const T*, const T*, const T*, index_t,     \
                                   index_t, index_t, index_t, T, cudaStream_t);
LEVERS_MATMUL(float)
LEVERS_MATMUL(double)

}  // namespace levers::kernels::cuda
