// layernorm on the GPU, one warp per row (16-byte loads where the rows
// allow), the CPU's per-row maths in the accumulator type; backward sums the
// weight and bias gradients as it goes, per block, then adds the blocks' sums
// in a fixed order (levers/kernels/cuda/columns.cuh): no atomics, no second pass
// over d_out and x.
#include "levers/kernels/layernorm.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/columns.cuh"
#include "levers/kernels/cuda/device_math.cuh"

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

// Rows [rows_per_block · block, ...) by the block's warps in turn. With
// `partial_w` (the weight and bias gradients wanted), each warp also adds its
// rows' d_out·x̂ and d_out per column into its own slice of shared memory
// (every sum has one owner: no atomics), the block adds its warps' slices in
// order into one partial row, and finish_column_sums adds the blocks' rows.
template <int W, class S>
__global__ void layernorm_backward_kernel(S* d_x, acc_t<S>* partial_w, acc_t<S>* partial_b, const S* d_out,
                                          const S* x, const S* w, const acc_t<S>* mean, const acc_t<S>* rstd,
                                          index_t rows, index_t channels, index_t rows_per_block) {
    using A = acc_t<S>;
    extern __shared__ __align__(16) unsigned char slices[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    A* sum_w = partial_w ? reinterpret_cast<A*>(slices) + warp * 2 * channels : nullptr;
    A* sum_b = sum_w ? sum_w + channels : nullptr;
    if (sum_w)
        for (index_t c = lane; c < 2 * channels; c += 32) sum_w[c] = 0;  // the warp's own slice
    __syncwarp();
    const index_t first = blockIdx.x * rows_per_block;
    const index_t end = first + rows_per_block < rows ? first + rows_per_block : rows;
    for (index_t r = first + warp; r < end; r += kWarpsPerBlock) {
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
                const A xhat = (load(xv.v[j]) - m) * rs, go = load(gv.v[j]);
                d.v[j] = store<S>(rs * (go * load(wv.v[j]) - mean_dxhat - xhat * mean_dxhat_xhat));
                if (sum_w) {
                    sum_w[c + j] += go * xhat;
                    sum_b[c + j] += go;
                }
            }
            store_pack(dx + c, d);
        }
    }
    if (!partial_w) return;
    __syncthreads();
    for (index_t c = threadIdx.x; c < channels; c += blockDim.x) {
        A bw = 0, bb = 0;
        for (int k = 0; k < kWarpsPerBlock; ++k) {
            const A* slice = reinterpret_cast<const A*>(slices) + k * 2 * channels;
            bw += slice[c];
            bb += slice[channels + c];
        }
        partial_w[blockIdx.x * channels + c] = bw;
        partial_b[blockIdx.x * channels + c] = bb;
    }
}

// The pack width a layernorm launch can use: kPack<S> where it divides the
// channels and every array is aligned16, else 1.
template <class S> bool packs_fit(index_t channels, std::initializer_list<const void*> arrays) {
    return channels % kPack<S> == 0 && aligned16(arrays);
}

// d_out[r, c] · x̂[r, c], the summand of the layernorm's weight gradient
// (for layers too wide for the backward kernel's shared sums).
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
    using A = acc_t<S>;
    if (rows <= 0) return;
    // Each warp's two slices of sums (weight, bias) in shared memory; past
    // what a block may have (96 KiB on every supported GPU), or when the
    // layer is frozen, one row per warp and no sums.
    const std::size_t slice_bytes = 2 * kWarpsPerBlock * static_cast<std::size_t>(channels) * sizeof(A);
    const bool sums = d_weight && slice_bytes <= (96u << 10);
    const index_t rows_per_block = sums ? 16 : kWarpsPerBlock;  // with sums: 2 rows per warp, fewer partial rows
    const index_t blocks = (rows + rows_per_block - 1) / rows_per_block;
    Scratch<A> partial(sums ? static_cast<std::size_t>(2 * blocks * channels) : 0);
    A* partial_w = sums ? partial.get() : nullptr;
    A* partial_b = sums ? partial.get() + blocks * channels : nullptr;
    const std::size_t shared = sums ? slice_bytes : 0;
    auto launch = [&](auto kernel) {
        if (shared > (48u << 10))
            LEVERS_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                   static_cast<int>(shared)));
        LEVERS_LAUNCH(kernel<<<static_cast<unsigned>(blocks), 32 * kWarpsPerBlock, shared, stream>>>(
            d_x, partial_w, partial_b, d_out, x, weight, mean, rstd, rows, channels, rows_per_block));
    };
    if (packs_fit<S>(channels, {d_x, d_out, x, weight}))
        launch(layernorm_backward_kernel<kPack<S>, S>);
    else
        launch(layernorm_backward_kernel<1, S>);
    if (!d_weight) return;  // frozen
    if (sums) {
        finish_column_sums(d_weight, partial_w, blocks, channels, stream);
        finish_column_sums(d_bias, partial_b, blocks, channels, stream);
        return;
    }
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

namespace {
template <class S> void layernorm_call(const LayerNormCall& c) {
    layernorm_forward(ptr<S>(c.out), ptr<acc_t<S>>(c.mean), ptr<acc_t<S>>(c.rstd), ptr<const S>(c.x),
                      ptr<const S>(c.weight), ptr<const S>(c.bias), c.x.shape.rows(), c.x.shape.last(), stream_of(c),
                      static_cast<acc_t<S>>(c.eps));
}
template <class S> void layernorm_grad_call(const LayerNormBackwardCall& c) {
    layernorm_backward(ptr<S>(c.d_x), ptr<S>(c.d_weight), ptr<S>(c.d_bias), ptr<const S>(c.d_out), ptr<const S>(c.x),
                       ptr<const acc_t<S>>(c.mean), ptr<const acc_t<S>>(c.rstd), ptr<const S>(c.weight),
                       c.x.shape.rows(), c.x.shape.last(), stream_of(c));
}
LEVERS_CUDA_KERNELS(LayerNormCall, layernorm_call);
LEVERS_CUDA_KERNELS(LayerNormBackwardCall, layernorm_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
