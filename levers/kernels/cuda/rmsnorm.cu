// rmsnorm on the GPU: one warp per row, the CPU's per-row maths in the
// accumulator type; the weight's gradient is a column sum over rows in a
// fixed order (levers/kernels/cuda/columns.cuh): no atomics.
#include "levers/kernels/rmsnorm.hpp"
#include "levers/kernels/cuda/columns.cuh"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/register.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

template <class S>
__global__ void rmsnorm_forward_kernel(S* out, acc_t<S>* rstd, const S* x, const S* w, index_t rows, index_t channels,
                                       acc_t<S> eps) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  // the whole warp leaves together
    const S* xr = x + r * channels;
    A squares = 0;
    for (index_t c = lane; c < channels; c += 32) squares += load(xr[c]) * load(xr[c]);
    const A rs = A(1) / sqrt(warp_sum(squares) / static_cast<A>(channels) + eps);
    S* o = out + r * channels;
    for (index_t c = lane; c < channels; c += 32) o[c] = store<S>(load(xr[c]) * rs * load(w[c]));
    if (lane == 0) rstd[r] = rs;
}

template <class S>
__global__ void rmsnorm_backward_kernel(S* d_x, const S* d_out, const S* x, const S* w, const acc_t<S>* rstd,
                                        index_t rows, index_t channels) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const S *g = d_out + r * channels, *xr = x + r * channels;
    const A rs = rstd[r];
    A dot = 0;
    for (index_t c = lane; c < channels; c += 32) dot += load(g[c]) * load(w[c]) * load(xr[c]) * rs;
    const A mean_dot = warp_sum(dot) / static_cast<A>(channels);
    S* dx = d_x + r * channels;
    for (index_t c = lane; c < channels; c += 32)
        dx[c] = store<S>(rs * (load(g[c]) * load(w[c]) - load(xr[c]) * rs * mean_dot));
}

// d_out[r, c] · x[r, c] · rstd[r]: the summand of the weight's gradient.
template <class S> struct GradTimesNormalised {
    const S *d_out, *x;
    const acc_t<S>* rstd;
    index_t cols;
    __device__ acc_t<S> operator()(index_t r, index_t c) const {
        return load(d_out[r * cols + c]) * load(x[r * cols + c]) * rstd[r];
    }
};

template <class S> void rmsnorm_call(const RmsNormCall& c) {
    const index_t rows = c.x.shape.rows(), channels = c.x.shape.last();
    if (rows <= 0) return;
    LEVERS_LAUNCH(rmsnorm_forward_kernel<S><<<blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<acc_t<S>>(c.rstd), ptr<const S>(c.x), ptr<const S>(c.weight), rows, channels,
        static_cast<acc_t<S>>(c.eps)));
}

template <class S> void rmsnorm_grad_call(const RmsNormBackwardCall& c) {
    const index_t rows = c.x.shape.rows(), channels = c.x.shape.last();
    if (rows <= 0) return;
    const S *g = ptr<const S>(c.d_out), *x = ptr<const S>(c.x);
    const acc_t<S>* rstd = ptr<const acc_t<S>>(c.rstd);
    LEVERS_LAUNCH(rmsnorm_backward_kernel<S><<<blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream_of(c)>>>(
        ptr<S>(c.d_x), g, x, ptr<const S>(c.weight), rstd, rows, channels));
    if (S* d_w = ptr<S>(c.d_weight))
        add_column_sums(d_w, rows, channels, GradTimesNormalised<S>{g, x, rstd, channels}, stream_of(c));
}

LEVERS_CUDA_KERNELS(RmsNormCall, rmsnorm_call);
LEVERS_CUDA_KERNELS(RmsNormBackwardCall, rmsnorm_grad_call);

}  // namespace

}  // namespace levers::kernels::cuda
