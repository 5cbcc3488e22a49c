// Dropout on the GPU: the mask is the hash of levers/kernels/dropout.hpp, the same
// on the CPU and here, recomputed by backward (nothing stored).
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/dropout.hpp"

#include <bit>

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S>
__global__ void dropout_kernel(S* out, const S* in, index_t n, std::uint64_t key, float p, acc_t<S> scale) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    out[i] = store<S>(dropout_keeps(key, i, p) ? load(in[i]) * scale : acc_t<S>(0));
}

template <class S> void dropout_call(const DropoutCall& c) {
    const index_t n = c.in.numel();
    if (n <= 0) return;
    const auto p = static_cast<float>(c.p);
    const acc_t<S> scale = acc_t<S>(1) / (acc_t<S>(1) - static_cast<acc_t<S>>(p));
    LEVERS_LAUNCH(dropout_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<const S>(c.in), n, c.key, p, scale));
}
LEVERS_CUDA_KERNELS(DropoutCall, dropout_call);

}  // namespace

}  // namespace levers::kernels::cuda
