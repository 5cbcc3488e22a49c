// Global-norm gradient clipping on the GPU: Σ g² in double over a grid fixed
// by the gradient's size (each block's partial, then the partials in order:
// the same norm every run), copied to the host, then the scale applied where
// the norm is too large.
#include "levers/kernels/grad_clip.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"

#include <algorithm>
#include <cmath>

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kBlocks = 512;  // at most: fewer where the gradient is shorter than their threads

template <class S> __global__ void sum_squares_kernel(double* partial, const S* g, index_t n) {
    double s = 0;
    for (index_t i = blockIdx.x * static_cast<index_t>(kThreads) + threadIdx.x; i < n;
         i += static_cast<index_t>(kThreads) * gridDim.x) {
        const double x = load(g[i]);
        s += x * x;
    }
    const double total = block_sum<kThreads>(s);
    if (threadIdx.x == 0) partial[blockIdx.x] = total;
}

__global__ void sum_partials_kernel(double* out, const double* partial, int blocks) {
    double s = 0;
    for (int i = threadIdx.x; i < blocks; i += kThreads) s += partial[i];
    const double total = block_sum<kThreads>(s);
    if (threadIdx.x == 0) *out = total;
}

}  // namespace

template <class S> double clip_grad_norm(S* grad, index_t n, double max_norm, cudaStream_t stream) {
    const int blocks = static_cast<int>(std::clamp<index_t>((n + kThreads - 1) / kThreads, 1, kBlocks));
    Scratch<double> partial(blocks + 1);
    LEVERS_LAUNCH(sum_squares_kernel<<<blocks, kThreads, 0, stream>>>(partial.get(), grad, n));
    LEVERS_LAUNCH(sum_partials_kernel<<<1, kThreads, 0, stream>>>(partial.get() + blocks, partial.get(), blocks));
    double host = 0;
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(&host, partial.get() + blocks, sizeof host, cudaMemcpyDeviceToHost, stream));
    LEVERS_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double norm = std::sqrt(host);
    if (max_norm > 0 && norm > max_norm) scale(grad, static_cast<acc_t<S>>(max_norm / (norm + 1e-6)), n, stream);
    return norm;
}

template double clip_grad_norm<float>(float*, index_t, double, cudaStream_t);
template double clip_grad_norm<double>(double*, index_t, double, cudaStream_t);
template double clip_grad_norm<bf16>(bf16*, index_t, double, cudaStream_t);

namespace {
template <class S> void clip_call(const ClipGradNormCall& c) {
    *c.result = clip_grad_norm(ptr<S>(c.grad), c.grad.numel(), c.max_norm, stream_of(c));
}
LEVERS_CUDA_KERNELS(ClipGradNormCall, clip_call);
}  // namespace

}  // namespace levers::kernels::cuda
