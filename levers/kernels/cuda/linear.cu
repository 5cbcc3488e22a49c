// The linear layer through cuBLAS (cuBLASLt, linear_lt.cu, where an epilogue
// fuses the bias, GELU or GELU's derivative); the bias gradient as column sums.
#include "levers/kernels/linear_gelu.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/blas.cuh"
#include "levers/kernels/cuda/columns.cuh"
#include "levers/kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S> __global__ void add_bias_kernel(S* out, const S* bias, index_t n, index_t cols) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n * cols) out[i] = store<S>(load(out[i]) + load(bias[i % cols]));
}

// out[n, out] (rows out_ld apart) = in[n, in] · Wᵀ: column-major out' = W'ᵀ(op T) · in'(op N).
template <class S>
void product(S* out, const S* in, const S* weight, index_t n, index_t in_dim, index_t out_dim, index_t out_ld,
             cudaStream_t stream) {
    gemm<S>(stream, CUBLAS_OP_T, CUBLAS_OP_N, out_dim, n, in_dim, 1, weight, in_dim, 0, in, in_dim, 0, 0, out, out_ld,
            0, 1);
}

// Rows of out or d_out further apart than out_dim only without a bias (the
// bias kernels and epilogues take contiguous rows).
void check_rows(index_t out_ld, index_t out_dim, bool bias) {
    if (out_ld < out_dim || (bias && out_ld != out_dim))
        detail::op_refused("linear: rows out_ld apart need out_ld >= out_dim, and no bias", __FILE__, __LINE__);
}

}  // namespace

template <class S>
void linear_forward(S* out, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim, index_t out_dim,
                    cudaStream_t stream, index_t out_ld) {
    if (out_ld == 0) out_ld = out_dim;
    check_rows(out_ld, out_dim, bias != nullptr);
    if (n <= 0) return;
    if (bias && linear_epilogue<S>(out, nullptr, in, weight, bias, n, in_dim, out_dim, stream)) return;
    product(out, in, weight, n, in_dim, out_dim, out_ld, stream);
    if (bias)
        LEVERS_LAUNCH(add_bias_kernel<<<blocks_for(n * out_dim, kThreads), kThreads, 0, stream>>>(out, bias, n,
                                                                                                  out_dim));
}

template <class S>
void linear_gelu_forward(S* out, S* pre, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim,
                         index_t out_dim, cudaStream_t stream) {
    if (n <= 0) return;
    // GELU in the epilogue for bf16 only: cuBLASLt's own tanh-GELU may differ
    // from the CPU's in the last f32 bits, and f32 is the exact reference.
    if constexpr (sizeof(S) == 2)
        if (linear_epilogue<S>(out, pre, in, weight, bias, n, in_dim, out_dim, stream)) return;
    linear_forward(pre, in, weight, bias, n, in_dim, out_dim, stream);
    gelu_forward(out, pre, n * out_dim, stream);
}

template <class S>
void linear_backward(S* d_in, S* d_weight, S* d_bias, const S* d_out, const S* in, const S* weight, index_t n,
                     index_t in_dim, index_t out_dim, cudaStream_t stream, index_t out_ld) {
    if (out_ld == 0) out_ld = out_dim;
    check_rows(out_ld, out_dim, d_bias != nullptr);
    if (n <= 0) return;
    // d_in[n, in] = d_out[n, out] · W[out, in].
    if (d_in)
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_N, in_dim, n, out_dim, 1, weight, in_dim, 0, d_out, out_ld, 0, 0, d_in,
                in_dim, 0, 1);
    // d_W[out, in] += d_outᵀ · in.
    if (d_weight)
        gemm<S>(stream, CUBLAS_OP_N, CUBLAS_OP_T, in_dim, out_dim, n, 1, in, in_dim, 0, d_out, out_ld, 0, 1, d_weight,
                in_dim, 0, 1);
    if (d_bias) add_column_sums(d_bias, n, out_dim, ColumnValue<S>{d_out, out_dim}, stream);
}

template <class S>
void linear_gelu_backward(S* d_pre, S* d_weight, S* d_bias, const S* d_out, const S* in, const S* pre,
                          const S* weight, index_t n, index_t in_dim, index_t out_dim, cudaStream_t stream) {
    if (n <= 0) return;
    // GELU's derivative in the epilogue for bf16 only, as in the forward.
    if constexpr (sizeof(S) == 2) {
        if (linear_dgelu_epilogue<S>(d_pre, pre, d_out, weight, n, in_dim, out_dim, out_dim, stream)) {
            linear_backward<S>(nullptr, d_weight, d_bias, d_out, in, weight, n, in_dim, out_dim, stream);
            return;
        }
    }
    linear_backward(d_pre, d_weight, d_bias, d_out, in, weight, n, in_dim, out_dim, stream);
    gelu_backward(d_pre, d_pre, pre, n * in_dim, stream);
}

#define LEVERS_LINEAR(S)                                                                                          \
    template void linear_forward<S>(S*, const S*, const S*, const S*, index_t, index_t, index_t, cudaStream_t,    \
                                    index_t);                                                                    \
    template void linear_gelu_forward<S>(S*, S*, const S*, const S*, const S*, index_t, index_t, index_t,         \
                                         cudaStream_t);                                                          \
    template void linear_backward<S>(S*, S*, S*, const S*, const S*, const S*, index_t, index_t, index_t,         \
                                     cudaStream_t, index_t);                                                     \
    template void linear_gelu_backward<S>(S*, S*, S*, const S*, const S*, const S*, const S*, index_t, index_t,   \
                                          index_t, cudaStream_t);
LEVERS_LINEAR(float)
LEVERS_LINEAR(double)
LEVERS_LINEAR(bf16)

namespace {
template <class S> void linear_call(const LinearCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1];
    linear_forward(ptr<S>(c.out), ptr<const S>(c.in), ptr<const S>(c.weight), ptr<const S>(c.bias), c.in.shape.rows(),
                   in_dim, out_dim, stream_of(c), c.out_ld);
}
template <class S> void linear_grad_call(const LinearBackwardCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1];
    linear_backward(ptr<S>(c.d_in), ptr<S>(c.d_weight), ptr<S>(c.d_bias), ptr<const S>(c.d_out), ptr<const S>(c.in),
                    ptr<const S>(c.weight), c.in.shape.rows(), in_dim, out_dim, stream_of(c), c.out_ld);
}
template <class S> void linear_gelu_call(const LinearGeluCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1];
    linear_gelu_forward(ptr<S>(c.out), ptr<S>(c.pre), ptr<const S>(c.in), ptr<const S>(c.weight), ptr<const S>(c.bias),
                        c.in.shape.rows(), in_dim, out_dim, stream_of(c));
}
template <class S> void gelu_linear_grad_call(const GeluLinearBackwardCall& c) {
    const index_t out_dim = c.weight.shape[0], in_dim = c.weight.shape[1];
    linear_gelu_backward(ptr<S>(c.d_pre), ptr<S>(c.d_weight), ptr<S>(c.d_bias), ptr<const S>(c.d_out),
                         ptr<const S>(c.in), ptr<const S>(c.pre), ptr<const S>(c.weight), c.in.shape.rows(), in_dim,
                         out_dim,
                         stream_of(c));
}
LEVERS_CUDA_KERNELS(LinearCall, linear_call);
LEVERS_CUDA_KERNELS(LinearBackwardCall, linear_grad_call);
LEVERS_CUDA_KERNELS(LinearGeluCall, linear_gelu_call);
LEVERS_CUDA_KERNELS(GeluLinearBackwardCall, gelu_linear_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
