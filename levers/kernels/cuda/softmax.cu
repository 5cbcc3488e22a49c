// softmax and log_softmax on the GPU (levers/kernels/softmax.hpp): one block per
// row (256 threads, one warp for rows of at most 256), the maximum and the sum
// by block reductions in a fixed order, in the accumulator type.
#include "levers/kernels/softmax.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"

#include <cmath>

namespace levers::kernels::cuda {

namespace {

template <int T, class S> __global__ void softmax_kernel(S* out, const S* in, index_t n, bool log) {
    using A = acc_t<S>;
    const S* x = in + blockIdx.x * n;
    S* y = out + blockIdx.x * n;
    A m = -INFINITY;
    for (index_t i = threadIdx.x; i < n; i += T) m = fmax(m, load(x[i]));
    m = block_max<T>(m);
    A s = 0;
    for (index_t i = threadIdx.x; i < n; i += T) s += exp(load(x[i]) - m);
    s = block_sum<T>(s);
    const A shift = m + ::log(s), inv = A(1) / s;
    for (index_t i = threadIdx.x; i < n; i += T)
        y[i] = store<S>(log ? load(x[i]) - shift : exp(load(x[i]) - m) * inv);
}

template <int T, class S> __global__ void softmax_backward_kernel(S* d_in, const S* d_out, const S* out, index_t n, bool log) {
    using A = acc_t<S>;
    const index_t base = blockIdx.x * n;
    A s = 0;
    for (index_t i = threadIdx.x; i < n; i += T)
        s += log ? load(d_out[base + i]) : load(d_out[base + i]) * load(out[base + i]);
    s = block_sum<T>(s);
    for (index_t i = threadIdx.x; i < n; i += T) {
        const A g = load(d_out[base + i]), y = load(out[base + i]);
        d_in[base + i] = store<S>(log ? g - exp(y) * s : y * (g - s));
    }
}

template <class S> void softmax_call(const SoftmaxCall& c) {
    const index_t n = c.in.shape.last(), rows = c.in.shape.rows();
    if (rows == 0 || n == 0) return;
    with_row_threads<32, 256>(n, [&](auto threads) {
        constexpr int T = decltype(threads)::value;
        LEVERS_LAUNCH(softmax_kernel<T, S><<<static_cast<unsigned>(rows), T, 0, stream_of(c)>>>(
            ptr<S>(c.out), ptr<const S>(c.in), n, c.log));
    });
}
template <class S> void softmax_grad_call(const SoftmaxBackwardCall& c) {
    const index_t n = c.out.shape.last(), rows = c.out.shape.rows();
    if (rows == 0 || n == 0) return;
    with_row_threads<32, 256>(n, [&](auto threads) {
        constexpr int T = decltype(threads)::value;
        LEVERS_LAUNCH(softmax_backward_kernel<T, S><<<static_cast<unsigned>(rows), T, 0, stream_of(c)>>>(
            ptr<S>(c.d_in), ptr<const S>(c.d_out), ptr<const S>(c.out), n, c.log));
    });
}
LEVERS_CUDA_KERNELS(SoftmaxCall, softmax_call);
LEVERS_CUDA_KERNELS(SoftmaxBackwardCall, softmax_grad_call);

}  // namespace
}  // namespace levers::kernels::cuda
