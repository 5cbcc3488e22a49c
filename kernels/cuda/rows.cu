// Row-wise ops on the card: layernorm (one warp per row) and softmax
// cross-entropy (one block per row), with the CPU's per-row maths
// (kernels/<op>.hpp) in the accumulator type. Column sums (the layernorm's
// parameter gradients) go through kernels/cuda/columns.cuh: no atomics.
#include "kernels/cuda/columns.cuh"
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kRowThreads = 1024;  // cross-entropy: one block of these per row

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

// lse[r] over one row, by one block: each thread keeps a running max and a
// sum rescaled to it (one pass over the row), then the block combines them.
template <class S> __global__ void lse_kernel(acc_t<S>* lse, const S* logits, index_t vocab) {
    using A = acc_t<S>;
    const S* row = logits + blockIdx.x * vocab;
    A m = -INFINITY, s = 0;
    for (index_t v = threadIdx.x; v < vocab; v += kRowThreads) {
        const A x = load(row[v]);
        if (x > m) {
            s = s * exp(m - x) + A(1);
            m = x;
        } else {
            s += exp(x - m);
        }
    }
    const A row_max = block_max<kRowThreads>(m);
    const A total = block_sum<kRowThreads>(m == -INFINITY ? A(0) : s * exp(m - row_max));
    if (threadIdx.x == 0) lse[blockIdx.x] = row_max + log(total);
}

// One block: the mean of lse - logit[target] over counted rows, in double.
template <class S>
__global__ void mean_loss_kernel(acc_t<S>* loss, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                                 index_t rows, index_t vocab, std::int32_t ignore_index) {
    double s = 0, c = 0;
    for (index_t r = threadIdx.x; r < rows; r += kRowThreads) {
        const std::int32_t t = targets[r];
        if (t == ignore_index || t < 0 || t >= vocab) continue;
        s += static_cast<double>(lse[r]) - static_cast<double>(load(logits[r * vocab + t]));
        c += 1;
    }
    const double total = block_sum<kRowThreads>(s), counted = block_sum<kRowThreads>(c);
    if (threadIdx.x == 0) *loss = counted > 0 ? static_cast<acc_t<S>>(total / counted) : acc_t<S>(0);
}

__global__ void count_kernel(int* counted, const std::int32_t* targets, index_t rows, std::int32_t ignore_index) {
    int c = 0;
    for (index_t r = threadIdx.x; r < rows; r += kRowThreads) c += targets[r] != ignore_index;
    const int total = block_sum<kRowThreads>(c);
    if (threadIdx.x == 0) *counted = total;
}

// One block per row: softmax minus the target's one-hot, scaled.
template <class S>
__global__ void ce_backward_kernel(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                                   acc_t<S> d_loss, const int* counted, index_t vocab, std::int32_t ignore_index) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x;
    const std::int32_t t = targets[r];
    const bool skip = t == ignore_index || *counted == 0;
    const A scale = skip ? A(0) : d_loss / static_cast<A>(*counted), l = lse[r];
    const S* in = logits + r * vocab;
    S* out = d_logits + r * vocab;
    for (index_t v = threadIdx.x; v < vocab; v += kRowThreads)
        out[v] = store<S>(skip ? A(0) : (exp(load(in[v]) - l) - (v == t ? A(1) : A(0))) * scale);
}

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

template <class S>
void cross_entropy_forward(acc_t<S>* loss, acc_t<S>* lse, const S* logits, const std::int32_t* targets, index_t rows,
                           index_t vocab, cudaStream_t stream, std::int32_t ignore_index) {
    if (rows <= 0) return;
    LEVERS_LAUNCH(lse_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(lse, logits, vocab));
    LEVERS_LAUNCH(mean_loss_kernel<<<1, kRowThreads, 0, stream>>>(loss, lse, logits, targets, rows, vocab,
                                                                   ignore_index));
}

template <class S>
void cross_entropy_backward(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                            acc_t<S> d_loss, index_t rows, index_t vocab, cudaStream_t stream,
                            std::int32_t ignore_index) {
    if (rows <= 0) return;
    Scratch<int> counted(1, stream);
    LEVERS_LAUNCH(count_kernel<<<1, kRowThreads, 0, stream>>>(counted.get(), targets, rows, ignore_index));
    LEVERS_LAUNCH(ce_backward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        d_logits, lse, logits, targets, d_loss, counted.get(), vocab, ignore_index));
}

#define LEVERS_ROWS(S)                                                                                             \
    template void layernorm_forward<S>(S*, acc_t<S>*, acc_t<S>*, const S*, const S*, const S*, index_t, index_t,   \
                                       cudaStream_t, acc_t<S>);                                                   \
    template void layernorm_backward<S>(S*, S*, S*, const S*, const S*, const acc_t<S>*, const acc_t<S>*,          \
                                        const S*, index_t, index_t, cudaStream_t);                                 \
    template void cross_entropy_forward<S>(acc_t<S>*, acc_t<S>*, const S*, const std::int32_t*, index_t, index_t, \
                                           cudaStream_t, std::int32_t);                                           \
    template void cross_entropy_backward<S>(S*, const acc_t<S>*, const S*, const std::int32_t*, acc_t<S>, index_t, \
                                            index_t, cudaStream_t, std::int32_t);
LEVERS_ROWS(float)
LEVERS_ROWS(double)
LEVERS_ROWS(bf16)

}  // namespace levers::kernels::cuda
