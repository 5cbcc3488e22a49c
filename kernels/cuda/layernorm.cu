// layernorm on the card, one warp per row (16-byte loads where the rows
// allow), the CPU's per-row maths in the accumulator type; the weight and
// bias gradients are column sums (kernels/cuda/columns.cuh: no atomics).
#include "kernels/cuda/columns.cuh"
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;

// Lanes take packs of W channels (W = 1: one at a time): where W divides the
// channels and the arrays are aligned16, every row starts on a pack.
template <int W, class S>
__global__ void layernorm_forward_kernel(S* out, acc_t<S>* mean, acc_t<S>* rstd, const S* x, const S* w, const S* b,
                                         index_t rows, index_t channels, acc_t<S> eps) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;  // the whole warp leaves together
    const S* xr = x + r * channels;
    A sum = 0;
    for (index_t c = lane * W; c < channels; c += 32 * W) {
        const auto v = load_pack<W>(xr + c);
        for (int j = 0; j < W; ++j) sum += load(v.v[j]);
    }
    const A m = warp_sum(sum) / static_cast<A>(channels);
    A var = 0;  // about the mean, as the CPU computes it
    for (index_t c = lane * W; c < channels; c += 32 * W) {
        const auto v = load_pack<W>(xr + c);
        for (int j = 0; j < W; ++j) {
            const A d = load(v.v[j]) - m;
            var += d * d;
        }
    }
    const A rs = A(1) / sqrt(warp_sum(var) / static_cast<A>(channels) + eps);
    S* o = out + r * channels;
    for (index_t c = lane * W; c < channels; c += 32 * W) {
        const auto v = load_pack<W>(xr + c), wv = load_pack<W>(w + c), bv = load_pack<W>(b + c);
        Pack<S, W> y;
        for (int j = 0; j < W; ++j) y.v[j] = store<S>((load(v.v[j]) - m) * rs * load(wv.v[j]) + load(bv.v[j]));
        store_pack(o + c, y);
    }
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

template <int W, class S>
__global__ void layernorm_backward_kernel(S* d_x, const S* d_out, const S* x, const S* w, const acc_t<S>* mean,
                                          const acc_t<S>* rstd, index_t rows, index_t channels) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x * static_cast<index_t>(kWarpsPerBlock) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (r >= rows) return;
    const S *g = d_out + r * channels, *xr = x + r * channels;
    const A m = mean[r], rs = rstd[r];
    A sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (index_t c = lane * W; c < channels; c += 32 * W) {
        const auto gv = load_pack<W>(g + c), wv = load_pack<W>(w + c), xv = load_pack<W>(xr + c);
        for (int j = 0; j < W; ++j) {
            const A dxhat = load(gv.v[j]) * load(wv.v[j]);
            sum_dxhat += dxhat;
            sum_dxhat_xhat += dxhat * (load(xv.v[j]) - m) * rs;
        }
    }
    const A mean_dxhat = warp_sum(sum_dxhat) / static_cast<A>(channels);
    const A mean_dxhat_xhat = warp_sum(sum_dxhat_xhat) / static_cast<A>(channels);
    S* dx = d_x + r * channels;
    for (index_t c = lane * W; c < channels; c += 32 * W) {
        const auto gv = load_pack<W>(g + c), wv = load_pack<W>(w + c), xv = load_pack<W>(xr + c);
        Pack<S, W> d;
        for (int j = 0; j < W; ++j) {
            const A xhat = (load(xv.v[j]) - m) * rs;
            d.v[j] = store<S>(rs * (load(gv.v[j]) * load(wv.v[j]) - mean_dxhat - xhat * mean_dxhat_xhat));
        }
        store_pack(dx + c, d);
    }
}

// The pack width a layernorm launch can use: kPack<S> where it divides the
// channels and every array is aligned16, else 1.
template <class S> bool packs_fit(index_t channels, std::initializer_list<const void*> arrays) {
    return channels % kPack<S> == 0 && aligned16(arrays);
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
    const unsigned blocks = blocks_for(rows, kWarpsPerBlock);
    if (packs_fit<S>(channels, {out, x, weight, bias}))
        LEVERS_LAUNCH(layernorm_forward_kernel<kPack<S>><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
            out, mean, rstd, x, weight, bias, rows, channels, eps));
    else
        LEVERS_LAUNCH(layernorm_forward_kernel<1><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
            out, mean, rstd, x, weight, bias, rows, channels, eps));
}

template <class S>
void layernorm_backward(S* d_x, S* d_weight, S* d_bias, const S* d_out, const S* x, const acc_t<S>* mean,
                        const acc_t<S>* rstd, const S* weight, index_t rows, index_t channels, cudaStream_t stream) {
    if (rows <= 0) return;
    const unsigned blocks = blocks_for(rows, kWarpsPerBlock);
    if (packs_fit<S>(channels, {d_x, d_out, x, weight}))
        LEVERS_LAUNCH(layernorm_backward_kernel<kPack<S>><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
            d_x, d_out, x, weight, mean, rstd, rows, channels));
    else
        LEVERS_LAUNCH(layernorm_backward_kernel<1><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
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
