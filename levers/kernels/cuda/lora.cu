// LoRA's adapters on the GPU as matrix products through cuBLAS.
#include "levers/kernels/lora.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/blas.cuh"

namespace levers::kernels::cuda {

template <class S>
void lora_forward(S* out, S* u, const S* in, const S* a, const S* b, index_t n, index_t in_dim, index_t out_dim,
                  index_t rank, acc_t<S> scale, cudaStream_t stream) {
    // u[n, r] = in · Aᵀ (A [r, in]); out[n, out] += scale · u · Bᵀ (B [out, r]): linear_forward's pattern.
    gemm<S>(stream, CUBLAS_OP_T, CUBLAS_OP_N, rank, n, in_dim, 1, a, in_dim, 0, in, in_dim, 0, 0, u, rank, 0, 1);
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

#define LEVERS_LORA(S)                                                                                        \
    template void lora_forward<S>(S*, S*, const S*, const S*, const S*, index_t, index_t, index_t, index_t,   \
                                  acc_t<S>, cudaStream_t);                                                   \
    template void lora_backward<S>(S*, S*, S*, S*, const S*, const S*, const S*, const S*, const S*, index_t, \
                                   index_t, index_t, index_t, acc_t<S>, cudaStream_t);
LEVERS_LORA(float)
LEVERS_LORA(double)
LEVERS_LORA(bf16)

namespace {
template <class S> void lora_call(const LoraCall& c) {
    const index_t rank = c.a.shape[0], in_dim = c.a.shape[1], out_dim = c.b.shape[0];
    lora_forward(ptr<S>(c.out), ptr<S>(c.u), ptr<const S>(c.in), ptr<const S>(c.a), ptr<const S>(c.b),
                 c.in.shape.rows(), in_dim, out_dim, rank, static_cast<acc_t<S>>(c.scale), stream_of(c));
}
template <class S> void lora_grad_call(const LoraBackwardCall& c) {
    const index_t rank = c.a.shape[0], in_dim = c.a.shape[1], out_dim = c.b.shape[0];
    lora_backward(ptr<S>(c.d_in), ptr<S>(c.d_a), ptr<S>(c.d_b), ptr<S>(c.du), ptr<const S>(c.d_out),
                  ptr<const S>(c.in), ptr<const S>(c.u), ptr<const S>(c.a), ptr<const S>(c.b), c.in.shape.rows(),
                  in_dim, out_dim, rank, static_cast<acc_t<S>>(c.scale), stream_of(c));
}
LEVERS_CUDA_KERNELS(LoraCall, lora_call);
LEVERS_CUDA_KERNELS(LoraBackwardCall, lora_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
