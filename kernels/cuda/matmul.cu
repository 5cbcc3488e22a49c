// The linear layer and LoRA's adapters as matrix products through cuBLAS
// (cuBLASLt where an epilogue fuses the bias or GELU).
#include "kernels/cuda/blas.cuh"
#include "kernels/cuda/columns.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/gelu.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S> __global__ void add_bias_kernel(S* out, const S* bias, index_t n, index_t cols) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n * cols) out[i] = store<S>(load(out[i]) + load(bias[i % cols]));
}

// out[n, out] = in[n, in] · Wᵀ: column-major out' = W'ᵀ(op T) · in'(op N).
template <class S>
void product(S* out, const S* in, const S* weight, index_t n, index_t in_dim, index_t out_dim, cudaStream_t stream) {
    gemm<S>(stream, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, n, in_dim, 1, weight, in_dim, 0, in, in_dim, 0, 0, out,
            out_dim, 0, 1);
}

}  // namespace

template <class S>
void linear_forward(S* out, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim, index_t out_dim,
                    cudaStream_t stream) {
    if (n <= 0) return;
    if (bias && linear_epilogue<S>(out, nullptr, in, weight, bias, n, in_dim, out_dim, stream)) return;
    product(out, in, weight, n, in_dim, out_dim, stream);
    if (bias)
        LEVERS_LAUNCH(add_bias_kernel<<<blocks_for(n * out_dim, kThreads), kThreads, 0, stream>>>(out, bias, n,
                                                                                                  out_dim));
}

template <class S>
void linear_gelu_forward(S* out, S* pre, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim,
                         index_t out_dim, cudaStream_t stream) {
    if (n <= 0) return;
    if (linear_epilogue<S>(out, pre, in, weight, bias, n, in_dim, out_dim, stream)) return;
    linear_forward(pre, in, weight, bias, n, in_dim, out_dim, stream);
    gelu_forward(out, pre, n * out_dim, stream);
}

template <class S>
void linear_backward(S* d_in, S* d_weight, S* d_bias, const S* d_out, const S* in, const S* weight, index_t n,
                     index_t in_dim, index_t out_dim, cudaStream_t stream) {
    if (n <= 0) return;
    // d_in[n, in] = d_out[n, out] · W[out, in].
    if (d_in)
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, n, out_dim, 1, weight, in_dim, 0, d_out, out_dim, 0, 0, d_in,
                in_dim, 0, 1);
    // d_W[out, in] += d_outᵀ · in.
    if (d_weight)
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, out_dim, n, 1, in, in_dim, 0, d_out, out_dim, 0, 1, d_weight,
                in_dim, 0, 1);
    if (d_bias) add_column_sums(d_bias, n, out_dim, ColumnValue<S>{d_out, out_dim}, stream);
}

template <class S>
void lora_forward(S* out, S* u, const S* in, const S* a, const S* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, acc_t<S> scale, cudaStream_t stream) {
    // u[n, r] = in · Aᵀ (A [r, in]); out[n, out] += scale · u · Bᵀ (B [out, r]): linear_forward's pattern.
    product(u, in, a, n, in_dim, rank, stream);
    gemm<S>(stream, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, n, rank, scale, b, rank, 0, u, rank, 0, 1, out, out_dim, 0, 1);
}

template <class S>
void lora_backward(S* d_in, S* d_a, S* d_b, S* du, const S* d_out, const S* in, const S* u, const S* a, const S* b,
                   index_t n, index_t in_dim, index_t out_dim, index_t rank, acc_t<S> scale, cudaStream_t stream) {
    // d_b[out, r] += scale · d_outᵀ · u.
    gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_T, rank, out_dim, n, scale, u, rank, 0, d_out, out_dim, 0, 1, d_b, rank, 0,
            1);
    // du[n, r] = scale · d_out · B.
    gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_N, rank, n, out_dim, scale, b, rank, 0, d_out, out_dim, 0, 0, du, rank, 0,
            1);
    // d_a[r, in] += duᵀ · in.
    gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, rank, n, 1, in, in_dim, 0, du, rank, 0, 1, d_a, in_dim, 0, 1);
    // d_in[n, in] += du · A.
    if (d_in)
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, n, rank, 1, a, in_dim, 0, du, rank, 0, 1, d_in, in_dim, 0,
                1);
}

#define LEVERS_MATMUL(S)                                                                                          \
    template void linear_forward<S>(S*, const S*, const S*, const S*, index_t, index_t, index_t, cudaStream_t);  \
    template void linear_gelu_forward<S>(S*, S*, const S*, const S*, const S*, index_t, index_t, index_t,         \
                                         cudaStream_t);                                                          \
    template void linear_backward<S>(S*, S*, S*, const S*, const S*, const S*, index_t, index_t, index_t,         \
                                     cudaStream_t);                                                              \
    template void lora_forward<S>(S*, S*, const S*, const S*, const S*, index_t, index_t, index_t, index_t,       \
                                  acc_t<S>, cudaStream_t);                                                       \
    template void lora_backward<S>(S*, S*, S*, S*, const S*, const S*, const S*, const S*, const S*, index_t,     \
                                   index_t, index_t, index_t, acc_t<S>, cudaStream_t);
LEVERS_MATMUL(float)
LEVERS_MATMUL(double)
LEVERS_MATMUL(bf16)

}  // namespace levers::kernels::cuda
