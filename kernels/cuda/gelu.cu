// GELU on the card (tanh form), the CPU's per-element maths in the accumulator type.
#include "framework/core/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/gelu.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S> __global__ void gelu_forward_kernel(S* out, const S* in, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = store<S>(gelu_value(load(in[i])));
}

template <class S> __global__ void gelu_backward_kernel(S* d_in, const S* d_out, const S* in, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) d_in[i] = store<S>(load(d_out[i]) * gelu_grad(load(in[i])));
}

}  // namespace

template <class S> void gelu_forward(S* out, const S* in, index_t n, cudaStream_t stream) {
    if (n > 0) LEVERS_LAUNCH(gelu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, in, n));
}

template <class S> void gelu_backward(S* d_in, const S* d_out, const S* in, index_t n, cudaStream_t stream) {
    if (n > 0)
        LEVERS_LAUNCH(gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(d_in, d_out, in, n));
}

#define LEVERS_GELU(S)                                                  \
    template void gelu_forward<S>(S*, const S*, index_t, cudaStream_t); \
    template void gelu_backward<S>(S*, const S*, const S*, index_t, cudaStream_t);
LEVERS_GELU(float)
LEVERS_GELU(double)
LEVERS_GELU(bf16)

}  // namespace levers::kernels::cuda
