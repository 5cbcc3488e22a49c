// Softmax cross-entropy on the card, one thread block per row: no
// probabilities beyond the logits (forward keeps one log-sum-exp per row,
// backward writes the gradient over the logits), sums in the accumulator type.
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

constexpr int kRowThreads = 1024;

// Whether a row's target counts: the forward's and backward's one rule.
__device__ bool counts(std::int32_t target, index_t vocab, std::int32_t ignore_index) {
    return target != ignore_index && target >= 0 && target < vocab;
}

// lse[r] over one row, by one block: each thread keeps a running max and a
// sum rescaled to it (one pass over the row), then the block combines them.
template <class S> __global__ void lse_kernel(acc_t<S>* lse, const S* logits, index_t vocab, index_t stride) {
    using A = acc_t<S>;
    const S* row = logits + blockIdx.x * stride;
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
                                 index_t rows, index_t vocab, index_t stride, std::int32_t ignore_index) {
    double s = 0, c = 0;
    for (index_t r = threadIdx.x; r < rows; r += kRowThreads) {
        const std::int32_t t = targets[r];
        if (!counts(t, vocab, ignore_index)) continue;
        s += static_cast<double>(lse[r]) - static_cast<double>(load(logits[r * stride + t]));
        c += 1;
    }
    const double total = block_sum<kRowThreads>(s), counted = block_sum<kRowThreads>(c);
    if (threadIdx.x == 0) *loss = counted > 0 ? static_cast<acc_t<S>>(total / counted) : acc_t<S>(0);
}

__global__ void count_kernel(int* counted, const std::int32_t* targets, index_t rows, index_t vocab,
                             std::int32_t ignore_index) {
    int c = 0;
    for (index_t r = threadIdx.x; r < rows; r += kRowThreads) c += counts(targets[r], vocab, ignore_index);
    const int total = block_sum<kRowThreads>(c);
    if (threadIdx.x == 0) *counted = total;
}

// One block per row: softmax minus the target's one-hot, scaled.
template <class S>
__global__ void ce_backward_kernel(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                                   acc_t<S> d_loss, const int* counted, index_t vocab, index_t stride,
                                   std::int32_t ignore_index) {
    using A = acc_t<S>;
    const index_t r = blockIdx.x;
    const std::int32_t t = targets[r];
    const bool skip = !counts(t, vocab, ignore_index) || *counted == 0;
    const A scale = skip ? A(0) : d_loss / static_cast<A>(*counted), l = lse[r];
    const S* in = logits + r * stride;
    S* out = d_logits + r * stride;
    for (index_t v = threadIdx.x; v < vocab; v += kRowThreads)
        out[v] = store<S>(skip ? A(0) : (exp(load(in[v]) - l) - (v == t ? A(1) : A(0))) * scale);
}

}  // namespace

template <class S>
void cross_entropy_forward(acc_t<S>* loss, acc_t<S>* lse, const S* logits, const std::int32_t* targets, index_t rows,
                           index_t vocab, cudaStream_t stream, std::int32_t ignore_index, index_t stride) {
    if (rows <= 0) return;
    if (stride == 0) stride = vocab;
    LEVERS_LAUNCH(lse_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(lse, logits, vocab, stride));
    LEVERS_LAUNCH(mean_loss_kernel<<<1, kRowThreads, 0, stream>>>(loss, lse, logits, targets, rows, vocab, stride,
                                                                   ignore_index));
}

template <class S>
void cross_entropy_backward(S* d_logits, const acc_t<S>* lse, const S* logits, const std::int32_t* targets,
                            acc_t<S> d_loss, index_t rows, index_t vocab, cudaStream_t stream,
                            std::int32_t ignore_index, index_t stride) {
    if (rows <= 0) return;
    if (stride == 0) stride = vocab;
    Scratch<int> counted(1);
    LEVERS_LAUNCH(count_kernel<<<1, kRowThreads, 0, stream>>>(counted.get(), targets, rows, vocab, ignore_index));
    LEVERS_LAUNCH(ce_backward_kernel<<<static_cast<unsigned>(rows), kRowThreads, 0, stream>>>(
        d_logits, lse, logits, targets, d_loss, counted.get(), vocab, stride, ignore_index));
}

#define LEVERS_CROSS_ENTROPY(S)                                                                                    \
    template void cross_entropy_forward<S>(acc_t<S>*, acc_t<S>*, const S*, const std::int32_t*, index_t, index_t, \
                                           cudaStream_t, std::int32_t, index_t);                                  \
    template void cross_entropy_backward<S>(S*, const acc_t<S>*, const S*, const std::int32_t*, acc_t<S>, index_t, \
                                            index_t, cudaStream_t, std::int32_t, index_t);
LEVERS_CROSS_ENTROPY(float)
LEVERS_CROSS_ENTROPY(double)
LEVERS_CROSS_ENTROPY(bf16)

}  // namespace levers::kernels::cuda
