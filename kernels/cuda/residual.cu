// The residual add on the card.
#include "framework/core/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S> __global__ void residual_kernel(S* out, const S* a, const S* b, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = store<S>(load(a[i]) + load(b[i]));
}

}  // namespace

template <class S> void residual_forward(S* out, const S* a, const S* b, index_t n, cudaStream_t stream) {
    if (n > 0) LEVERS_LAUNCH(residual_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n));
}

template void residual_forward<float>(float*, const float*, const float*, index_t, cudaStream_t);
template void residual_forward<double>(double*, const double*, const double*, index_t, cudaStream_t);
template void residual_forward<bf16>(bf16*, const bf16*, const bf16*, index_t, cudaStream_t);

}  // namespace levers::kernels::cuda
