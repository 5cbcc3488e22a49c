// Element-wise helpers that are not ops of their own: scaling (gradient
// averaging over micro-batches, clipping) and storage conversions (bf16
// copies of f32 weights).
#include "framework/core/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S> __global__ void scale_kernel(S* x, acc_t<S> s, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] = store<S>(load(x[i]) * s);
}

template <class To, class From> __global__ void convert_kernel(To* to, const From* from, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) to[i] = store<To>(static_cast<acc_t<To>>(load(from[i])));
}

}  // namespace

template <class S> void scale(S* x, acc_t<S> s, index_t n, cudaStream_t stream) {
    if (n > 0) LEVERS_LAUNCH(scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, s, n));
}

template <class To, class From> void convert(To* to, const From* from, index_t n, cudaStream_t stream) {
    if (n > 0)
        LEVERS_LAUNCH(convert_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(to, from, n));
}

template void scale<float>(float*, float, index_t, cudaStream_t);
template void scale<double>(double*, double, index_t, cudaStream_t);
template void scale<bf16>(bf16*, float, index_t, cudaStream_t);
template void convert<bf16, float>(bf16*, const float*, index_t, cudaStream_t);
template void convert<float, bf16>(float*, const bf16*, index_t, cudaStream_t);

}  // namespace levers::kernels::cuda
