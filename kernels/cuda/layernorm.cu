// layernorm on the card, one warp per row, the CPU's per-row maths in the
// accumulator type; the weight and bias gradients are column sums
// (kernels/cuda/columns.cuh: no atomics).
#include "kernels/cuda/columns.cuh"
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

template <class S>
__global__ void layernorm_forward_kernel(S* out, acc_t<S>* mean, acc_t<S>* rstd, const S* x, const S* w, const S* b,
                                         index_t rows, index_t channels, acc_t<S> eps) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  // the whole warp leaves together
    const S* xr = x + r * channels;
    A sum = 0;
    for (index_t c = lane; c < channels; c += 32) sum += load(xr[c]);
    const A m = warp_sum(sum) / static_cast<A>(channels);
    A var = 0;  // about the mean, as the CPU computes it
    for (index_t c = lane; c < channels; c += 32) {
        const A d = load(xr[c]) - m;
        var += d * d;
    }
    const A rs = A(1) / sqrt(warp_sum(var) / static_cast<A>(channels) + eps);
    S* o = out + r * channels;
    for (index_t c = lane; c < channels; c += 32) o[c] = store<S>((load(xr[c]) - m) * rs * load(w[c]) + load(b[c]));
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

template <class S>
__global__ void layernorm_backward_kernel(S* d_x, const S* d_out, const S* x, const S* w, const acc_t<S>* mean,
                                          const acc_t<S>* rstd, index_t rows, index_t channels) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const S *g = d_out + r * channels, *xr = x + r * channels;
    const A m = mean[r], rs = rstd[r];
    A sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (index_t c = lane; c < channels; c += 32) {
        const A dxhat = load(g[c]) * load(w[c]);
        sum_dxhat += dxhat;
        sum_dxhat_xhat += dxhat * (load(xr[c]) - m) * rs;
    }
    const A mean_dxhat = warp_sum(sum_dxhat) / static_cast<A>(channels);
    const A mean_dxhat_xhat = warp_sum(sum_dxhat_xhat) / static_cast<A>(channels);
    S* dx = d_x + r * channels;
    for (index_t c = lane; c < channels; c += 32) {
        const A xhat = (load(xr[c]) - m) * rs;
        dx[c] = store<S>(rs * (load(g[c]) * load(w[c]) - mean_dxhat - xhat * mean_dxhat_xhat));
    }
}

// d_out[r, c] · x̂[r, c], the summand of the layernorm's weight gradient.
template <class S> struct GradTimesNormalised {
    const S *d_out, *x;
    const acc_t<S>*mean, *rstd;
    index_t cols;
    __device__ acc_t<S> operator()(index_t r, index_t c) const {
        return load(d_out[r * cols + c]) * (load(x[r * cols + c]) - mean[r]) * rstd[r];
    }
};

}  // namespace

template <class S>
void layernorm_forward(S* out, acc_t<S>* mean, acc_t<S>* rstd, const S* x, const S* weight, const S* bias,
                       index_t rows, index_t channels, cudaStream_t stream, acc_t<S> eps) {
    if (rows <= 0) return;
    LEVERS_LAUNCH(layernorm_forward_kernel<<<blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(
        out, mean, rstd, x, weight, bias, rows, channels, eps));
}

template <class S>
void layernorm_backward(S* d_x, S* d_weight, S* d_bias, const S* d_out, const S* x, const acc_t<S>* mean,
                        const acc_t<S>* rstd, const S* weight, index_t rows, index_t channels, cudaStream_t stream) {
    if (rows <= 0) return;
    LEVERS_LAUNCH(layernorm_backward_kernel<<<blocks_for(rows, kWarpsPerBlock), 32 * kWarpsPerBlock, 0, stream>>>(
        d_x, d_out, x, weight, mean, rstd, rows, channels));
    if (!d_weight) return;  // frozen
    add_column_sums(d_weight, rows, channels, GradTimesNormalised<S>{d_out, x, mean, rstd, channels}, stream);
    add_column_sums(d_bias, rows, channels, ColumnValue<S>{d_out, channels}, stream);
}

#define LEVERS_LAYERNORM(S)                                                                                      \
    template void layernorm_forward<S>(S*, acc_t<S>*, acc_t<S>*, const S*, const S*, const S*, index_t, index_t, \
                                       cudaStream_t, acc_t<S>);                                                 \
    template void layernorm_backward<S>(S*, S*, S*, const S*, const S*, const acc_t<S>*, const acc_t<S>*,        \
                                        const S*, index_t, index_t, cudaStream_t);
LEVERS_LAYERNORM(float)
LEVERS_LAYERNORM(double)
LEVERS_LAYERNORM(bf16)

}  // namespace levers::kernels::cuda
