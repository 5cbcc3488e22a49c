// Softmax cross-entropy on the GPU, one thread block per row: no
// probabilities beyond the logits (forward keeps one log-sum-exp per row,
// backward writes the gradient over the logits), sums in the accumulator type,
// 16-byte loads where the rows allow.
#include "levers/kernels/cross_entropy.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

// A row's block has 1024 threads, or 128 for a small vocabulary; the one-block kernels over rows choose alike.
template <class Launch> void with_threads(index_t items, Launch&& launch) {
    with_row_threads<128, 1024>(items, launch);
}

// Whether a row's target counts: the forward's and backward's one rule.
__device__ bool counts(std::int32_t target, index_t vocab, std::int32_t ignore_index) {
    return target != ignore_index && target >= 0 && target < vocab;
}

// Threads walk a row in packs of W logits (W = 1: one at a time), the last,
// partial pack one by one: calls f(v, x) for every logit x at column v.
template <int T, int W, class S, class F> __device__ void for_row(const S* row, index_t vocab, F&& f) {
    for (index_t v = threadIdx.x * W; v < vocab; v += T * W) {
        if (v + W <= vocab) {
            const auto p = load_pack<W>(row + v);
            for (int j = 0; j < W; ++j) f(v + j, load(p.v[j]));
        } else {
            for (index_t u = v; u < vocab; ++u) f(u, load(row[u]));
        }
    }
}

// lse[r] over one row, by one block: each thread keeps a running max and a
// sum rescaled to it (one pass over the row), then the block combines them.
template <int T, int W, class S>
__global__ void lse_kernel(acc_t<S>* lse, const S* logits, index_t vocab, index_t stride) {
    using A = acc_t<S>;
    A m = -INFINITY, s = 0;
    for_row<T, W>(logits + blockIdx.x * stride, vocab, [&](index_t, A x) {
        if (x > m) {
            s = s * exp(m - x) + A(1);
            m = x;
        } else {
            s += exp(x - m);
        }
    });
    const A row_max = block_max<T>(m);
    const A total = block_sum<T>(m == -INFINITY ? A(0) : s * exp(m - row_max));
    if (threadIdx.x == 0) lse[blockIdx.x] = row_max + log(total);
}

// One block: the mean of lse - logit[target] over counted rows, in double.
template <int T, class S>
__global__ void mean_loss_kernel(acc_t<S>* loss, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                                 index_t rows, index_t vocab, index_t stride, std::int32_t ignore_index) {
    double s = 0, c = 0;
    for (index_t r = threadIdx.x; r < rows; r += T) {
        const std::int32_t t = targets[r];
        if (!counts(t, vocab, ignore_index)) continue;
        s += static_cast<double>(lse[r]) - static_cast<double>(load(logits[r * stride + t]));
        c += 1;
    }
    const double total = block_sum<T>(s), counted = block_sum<T>(c);
    if (threadIdx.x == 0) *loss = counted > 0 ? static_cast<acc_t<S>>(total / counted) : acc_t<S>(0);
}

template <int T>
__global__ void count_kernel(int* counted, const std::int32_t* targets, index_t rows, index_t vocab,
                             std::int32_t ignore_index) {
    int c = 0;
    for (index_t r = threadIdx.x; r < rows; r += T) c += counts(targets[r], vocab, ignore_index);
    const int total = block_sum<T>(c);
    if (threadIdx.x == 0) *counted = total;
}

// One block per row: softmax minus the target's one-hot, scaled.
template <int T, int W, class S>
__global__ void ce_backward_kernel(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                                   acc_t<S> d_loss, const int* counted, index_t vocab, index_t stride,
                                   std::int32_t ignore_index) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x;
    const std::int32_t t = targets[r];
    const bool skip = !counts(t, vocab, ignore_index) || *counted == 0;
    const A scale = skip ? A(0) : d_loss / static_cast<A>(*counted), l = lse[r];
    auto grad = [&](index_t v, A x) { return store<S>(skip ? A(0) : (exp(x - l) - (v == t ? A(1) : A(0))) * scale); };
    const S* in = logits + r * stride;
    S* out = d_logits + r * stride;
    for (index_t v = threadIdx.x * W; v < vocab; v += T * W) {
        if (v + W <= vocab) {
            const auto p = load_pack<W>(in + v);
            Pack<S, W> g;
            for (int j = 0; j < W; ++j) g.v[j] = grad(v + j, load(p.v[j]));
            store_pack(out + v, g);
        } else {
            for (index_t u = v; u < vocab; ++u) out[u] = grad(u, load(in[u]));
        }
    }
}

// Rows are read and written in 16-byte packs where every row starts on one.
template <class S> bool rows_packed(index_t stride, std::initializer_list<const void*> arrays) {
    return (stride * static_cast<index_t>(sizeof(S))) % 16 == 0 && aligned16(arrays);
}

}  // namespace

template <class S>
void cross_entropy_forward(acc_t<S>* loss, acc_t<S>* lse, const S* logits, const std::int32_t* targets, index_t rows,
                           index_t vocab, cudaStream_t stream, std::int32_t ignore_index, index_t stride) {
    if (rows <= 0) return;
    if (stride == 0) stride = vocab;
    const auto blocks = static_cast<unsigned>(rows);
    const bool packed = rows_packed<S>(stride, {logits});
    with_threads(vocab / (packed ? kPack<S> : 1), [&](auto threads) {
        constexpr int T = decltype(threads)::value;
        if (packed)
            LEVERS_LAUNCH(lse_kernel<T, kPack<S>><<<blocks, T, 0, stream>>>(lse, logits, vocab, stride));
        else
            LEVERS_LAUNCH(lse_kernel<T, 1><<<blocks, T, 0, stream>>>(lse, logits, vocab, stride));
    });
    with_threads(rows, [&](auto threads) {
        constexpr int T = decltype(threads)::value;
        LEVERS_LAUNCH(mean_loss_kernel<T><<<1, T, 0, stream>>>(loss, lse, logits, targets, rows, vocab, stride,
                                                               ignore_index));
    });
}

template <class S>
void cross_entropy_backward(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                            acc_t<S> d_loss, index_t rows, index_t vocab, cudaStream_t stream,
                            std::int32_t ignore_index, index_t stride) {
    if (rows <= 0) return;
    if (stride == 0) stride = vocab;
    Scratch<int> counted(1);
    with_threads(rows, [&](auto threads) {
        constexpr int T = decltype(threads)::value;
        LEVERS_LAUNCH(count_kernel<T><<<1, T, 0, stream>>>(counted.get(), targets, rows, vocab, ignore_index));
    });
    const auto blocks = static_cast<unsigned>(rows);
    const bool packed = rows_packed<S>(stride, {d_logits, logits});
    with_threads(vocab / (packed ? kPack<S> : 1), [&](auto threads) {
        constexpr int T = decltype(threads)::value;
        if (packed)
            LEVERS_LAUNCH(ce_backward_kernel<T, kPack<S>><<<blocks, T, 0, stream>>>(
                d_logits, lse, logits, targets, d_loss, counted.get(), vocab, stride, ignore_index));
        else
            LEVERS_LAUNCH(ce_backward_kernel<T, 1><<<blocks, T, 0, stream>>>(
                d_logits, lse, logits, targets, d_loss, counted.get(), vocab, stride, ignore_index));
    });
}

#define LEVERS_CROSS_ENTROPY(S)                                                                                    \
    template void cross_entropy_forward<S>(acc_t<S>*, acc_t<S>*, const S*, const std::int32_t*, index_t, index_t, \
                                           cudaStream_t, std::int32_t, index_t);                                  \
    template void cross_entropy_backward<S>(S*, const acc_t<S>*, const S*, const std::int32_t*, acc_t<S>, index_t, \
                                            index_t, cudaStream_t, std::int32_t, index_t);
LEVERS_CROSS_ENTROPY(float)
LEVERS_CROSS_ENTROPY(double)
LEVERS_CROSS_ENTROPY(bf16)

namespace {
// Rows of t2 are its last dimension apart; i1 columns of them count (0: all).
template <class S> void cross_entropy_call(const CrossEntropyCall& c) {
    const index_t width = c.logits.shape.last(), vocab = c.vocab ? c.vocab : width;
    cross_entropy_forward(ptr<acc_t<S>>(c.loss), ptr<acc_t<S>>(c.lse), ptr<const S>(c.logits),
                          ptr<const std::int32_t>(c.targets), c.logits.shape.rows(), vocab, stream_of(c),
                          static_cast<std::int32_t>(c.ignore_index), width);
}
template <class S> void cross_entropy_grad_call(const CrossEntropyBackwardCall& c) {
    const index_t width = c.logits.shape.last(), vocab = c.vocab ? c.vocab : width;
    cross_entropy_backward(ptr<S>(c.d_logits), ptr<const acc_t<S>>(c.lse), ptr<const S>(c.logits),
                           ptr<const std::int32_t>(c.targets), static_cast<acc_t<S>>(c.d_loss), c.logits.shape.rows(),
                           vocab, stream_of(c), static_cast<std::int32_t>(c.ignore_index), width);
}
LEVERS_CUDA_KERNELS(CrossEntropyCall, cross_entropy_call);
LEVERS_CUDA_KERNELS(CrossEntropyBackwardCall, cross_entropy_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
