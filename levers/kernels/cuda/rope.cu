// Rotary embeddings on the GPU: one thread per pair (d, d + D/2) of a head,
// the CPU's per-pair maths in the accumulator type.
#include "levers/kernels/rope.hpp"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/register.cuh"

namespace levers::kernels::cuda {

namespace {

template <class S>
__global__ void rope_kernel(S* out, const S* x, const S* cos, const S* sin, index_t time, index_t heads, index_t d,
                            bool batched, bool inverse, index_t pairs) {
    using A = acc_t<S>;
    const index_t p = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (p >= pairs) return;
    const index_t half = d / 2, i = p % half, head_row = p / half;  // head_row: (b, t, h)
    const index_t bt = head_row / heads, t = bt % time;
    const index_t row = (batched ? bt : t) * d;
    const index_t at = head_row * d + i;
    A o1, o2;
    rope_pair(o1, o2, load(x[at]), load(x[at + half]), load(cos[row + i]), load(sin[row + i]), inverse);
    out[at] = store<S>(o1);
    out[at + half] = store<S>(o2);
}

template <class S> void rope_call(const RopeCall& c) {
    const index_t time = c.x.shape[1], heads = c.x.shape[2], d = c.x.shape[3];
    const index_t pairs = c.x.shape.numel() / 2;
    if (pairs <= 0) return;
    constexpr int kThreads = 256;
    LEVERS_LAUNCH(rope_kernel<S><<<blocks_for(pairs, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<const S>(c.x), ptr<const S>(c.cos), ptr<const S>(c.sin), time, heads, d,
        c.cos.shape.ndim() == 3, c.inverse, pairs));
}

LEVERS_CUDA_KERNELS(RopeCall, rope_call);

}  // namespace

}  // namespace levers::kernels::cuda
