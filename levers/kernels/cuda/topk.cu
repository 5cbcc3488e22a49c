// topk on the GPU: a thread per row, the CPU's selection (levers/kernels/topk.hpp).
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/topk.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 128;

template <class S> __global__ void topk_kernel(std::int32_t* index, const S* in, index_t rows, index_t cols, index_t k) {
    const index_t r = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (r >= rows) return;
    topk_row(index + r * k, in + r * cols, cols, k, [](S v) { return load(v); });
}

template <class S> void topk_call(const TopkCall& c) {
    const index_t rows = c.in.shape[0];
    if (rows <= 0) return;
    LEVERS_LAUNCH(topk_kernel<S><<<blocks_for(rows, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<std::int32_t>(c.index), ptr<const S>(c.in), rows, c.in.shape[1], c.index.shape[1]));
}
LEVERS_CUDA_KERNELS(TopkCall, topk_call);

}  // namespace

}  // namespace levers::kernels::cuda
