// cuBLAS for the kernel files: the calling thread's handle bound to a stream,
// one strided-batched GEMM for every storage type (bf16 inputs and
// outputs with fp32 accumulation; fp32 strictly in fp32, no TF32, so the
// parity tests compare like with like). Row-major arrays are seen as their
// column-major transposes. And the cuBLASLt linear layer.
#pragma once

#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/kernels/cuda/ops.hpp"

#include <cublas_v2.h>

namespace levers::kernels::cuda {

inline cublasHandle_t blas(cudaStream_t stream) {
    thread_local cublasHandle_t handle = nullptr;
    if (!handle) LEVERS_CUBLAS_CHECK(cublasCreate(&handle));
    LEVERS_CUBLAS_CHECK(cublasSetStream(handle, stream));
    return handle;
}

template <class S> constexpr cudaDataType data_type() {
    if constexpr (sizeof(S) == 2)
        return CUDA_R_16BF;
    else if constexpr (sizeof(S) == 4)
        return CUDA_R_32F;
    else
        return CUDA_R_64F;
}
template <class S> constexpr cublasComputeType_t compute_type() {
    return sizeof(S) == 8 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
}

// C = alpha · op(A) · op(B) + beta · C in cuBLAS's column-major terms, batched with strides.
template <class S>
void gemm(cudaStream_t s, cublasOperation_t ta, cublasOperation_t tb, index_t m, index_t n, index_t k,
          acc_t<S> alpha, const S* a, index_t lda, long long stride_a, const S* b, index_t ldb, long long stride_b,
          acc_t<S> beta, S* c, index_t ldc, long long stride_c, int count) {
    constexpr cudaDataType t = data_type<S>();
    LEVERS_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        blas(s), ta, tb, static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), &alpha, a, t,
        static_cast<int>(lda), stride_a, b, t, static_cast<int>(ldb), stride_b, &beta, c, t, static_cast<int>(ldc),
        stride_c, count, compute_type<S>(), CUBLAS_GEMM_DEFAULT));
}

// The linear layer through cuBLASLt (linear_lt.cu), its bias (and GELU)
// applied by the product's own epilogue instead of another pass over the
// output: out = in·Wᵀ + bias; with `pre_gelu`, pre_gelu = in·Wᵀ + bias and
// out = gelu(pre_gelu). Returns false, having queued nothing, where cuBLASLt
// offers no algorithm for these shapes, types or alignments.
template <class S>
bool linear_epilogue(S* out, S* pre_gelu, const S* in, const S* weight, const S* bias, index_t n, index_t in_dim,
                     index_t out_dim, cudaStream_t stream);
// d_pre = (d_out · W) ⊙ gelu'(pre) in one cuBLASLt product (rows of d_out
// out_ld apart): the gradient at the input of the GELU that fed this layer.
// Returns false, having queued nothing, where cuBLASLt offers no algorithm.
template <class S>
bool linear_dgelu_epilogue(S* d_pre, const S* pre, const S* d_out, const S* weight, index_t n, index_t in_dim,
                           index_t out_dim, index_t out_ld, cudaStream_t stream);

}  // namespace levers::kernels::cuda
