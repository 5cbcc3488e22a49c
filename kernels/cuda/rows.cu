// Row-wise ops on the card: layernorm and softmax cross-entropy. A first,
// plain version: one thread per row runs the same per-row maths as the CPU
// (kernels/<op>.hpp); column sums for the layernorm's parameter gradients run
// one thread per channel in row order, so results do not depend on timing.
#include "kernels/cross_entropy.hpp"
#include "framework/core/cuda_check.hpp"
#include "kernels/cuda/block_sum.cuh"
#include "kernels/cuda/ops.hpp"
#include "kernels/layernorm.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 128;
unsigned blocks_for(index_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <class T>
__global__ void layernorm_forward_kernel(T* out, T* mean, T* rstd, const T* x, const T* w, const T* b, index_t rows,
                                         index_t channels, T eps) {
    const index_t r = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (r < rows)
        layernorm_row_forward(out + r * channels, mean + r, rstd + r, x + r * channels, w, b, channels, eps);
}

template <class T>
__global__ void layernorm_backward_rows(T* d_x, const T* d_out, const T* x, const T* w, const T* mean, const T* rstd,
                                        index_t rows, index_t channels) {
    const index_t r = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (r < rows)
        layernorm_row_backward(d_x + r * channels, d_out + r * channels, x + r * channels, w, mean[r], rstd[r],
                               channels);
}

// d_weight[c] += Σ_r d_out[r, c] · x̂[r, c]; d_bias[c] += Σ_r d_out[r, c].
template <class T>
__global__ void layernorm_backward_params(T* d_w, T* d_b, const T* d_out, const T* x, const T* mean, const T* rstd,
                                          index_t rows, index_t channels) {
    const index_t c = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (c >= channels) return;
    T dw = 0, db = 0;
    for (index_t r = 0; r < rows; ++r) {
        const T g = d_out[r * channels + c];
        dw += g * (x[r * channels + c] - mean[r]) * rstd[r];
        db += g;
    }
    d_w[c] += dw;
    d_b[c] += db;
}

template <class T>
__global__ void lse_kernel(T* lse, const T* logits, index_t rows, index_t vocab) {
    const index_t r = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (r < rows) lse[r] = logsumexp_row(logits + r * vocab, vocab);
}

// One block: the mean of lse - logit[target] over counted rows, in double.
template <class T>
__global__ void mean_loss_kernel(T* loss, const T* lse, const T* logits, const std::int32_t* targets, index_t rows,
                                 index_t vocab, std::int32_t ignore_index) {
    double s = 0, c = 0;
    for (index_t r = threadIdx.x; r < rows; r += blockDim.x) {
        const std::int32_t t = targets[r];
        if (t == ignore_index || t < 0 || t >= vocab) continue;
        s += static_cast<double>(lse[r]) - static_cast<double>(logits[r * vocab + t]);
        c += 1;
    }
    const double total = block_sum<kThreads>(s), counted = block_sum<kThreads>(c);
    if (threadIdx.x == 0) *loss = counted > 0 ? static_cast<T>(total / counted) : T(0);
}

__global__ void count_kernel(int* counted, const std::int32_t* targets, index_t rows, std::int32_t ignore_index) {
    int c = 0;
    for (index_t r = threadIdx.x; r < rows; r += blockDim.x) c += targets[r] != ignore_index;
    const int total = block_sum<kThreads>(c);
    if (threadIdx.x == 0) *counted = total;
}

template <class T>
__global__ void ce_backward_kernel(T* d_logits, const T* lse, const T* logits, const std::int32_t* targets, T d_loss,
                                   const int* counted, index_t rows, index_t vocab, std::int32_t ignore_index) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= rows * vocab) return;
    const index_t r = i / vocab, v = i % vocab;
    const std::int32_t t = targets[r];
    if (t == ignore_index || *counted == 0) {
        d_logits[i] = T(0);
        return;
    }
    const T p = exp(logits[i] - lse[r]);
    d_logits[i] = (p - (v == t ? T(1) : T(0))) * d_loss / static_cast<T>(*counted);
}

}  // namespace

template <class T>
void layernorm_forward(T* out, T* mean, T* rstd, const T* x, const T* weight, const T* bias, index_t rows,
                       index_t channels, cudaStream_t stream, T eps) {
    if (rows > 0)
        layernorm_forward_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(out, mean, rstd, x, weight, bias, rows,
                                                                            channels, eps);
        LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void layernorm_backward(T* d_x, T* d_weight, T* d_bias, const T* d_out, const T* x, const T* mean, const T* rstd,
                        const T* weight, index_t rows, index_t channels, cudaStream_t stream) {
    if (rows <= 0) return;
    layernorm_backward_rows<<<blocks_for(rows), kThreads, 0, stream>>>(d_x, d_out, x, weight, mean, rstd, rows,
                                                                       channels);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    if (d_weight)
        layernorm_backward_params<<<blocks_for(channels), kThreads, 0, stream>>>(d_weight, d_bias, d_out, x, mean,
                                                                                 rstd, rows, channels);
        LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void cross_entropy_forward(T* loss, T* lse, const T* logits, const std::int32_t* targets, index_t rows, index_t vocab,
                           cudaStream_t stream, std::int32_t ignore_index) {
    if (rows <= 0) return;
    lse_kernel<<<blocks_for(rows), kThreads, 0, stream>>>(lse, logits, rows, vocab);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    mean_loss_kernel<<<1, kThreads, 0, stream>>>(loss, lse, logits, targets, rows, vocab, ignore_index);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void cross_entropy_backward(T* d_logits, const T* lse, const T* logits, const std::int32_t* targets, T d_loss,
                            index_t rows, index_t vocab, cudaStream_t stream, std::int32_t ignore_index) {
    if (rows <= 0) return;
    int* counted = nullptr;
    LEVERS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&counted), sizeof(int), stream));
    count_kernel<<<1, kThreads, 0, stream>>>(counted, targets, rows, ignore_index);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    const index_t n = rows * vocab;
    ce_backward_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(
        d_logits, lse, logits, targets, d_loss, counted, rows, vocab, ignore_index);
    LEVERS_CUDA_CHECK(cudaGetLastError());
    LEVERS_CUDA_CHECK(cudaFreeAsync(counted, stream));
}

#define LEVERS_ROWS(T)                                                                                          \
    template void layernorm_forward<T>(T*, T*, T*, const T*, const T*, const T*, index_t, index_t, cudaStream_t, \
                                       T);                                                                     \
    template void layernorm_backward<T>(T*, T*, T*, const T*, const T*, const T*, const T*, const T*, index_t,  \
                                        index_t, cudaStream_t);                                                \
    template void cross_entropy_forward<T>(T*, T*, const T*, const std::int32_t*, index_t, index_t, cudaStream_t, \
                                           std::int32_t);                                                      \
    template void cross_entropy_backward<T>(T*, const T*, const T*, const std::int32_t*, T, index_t, index_t,    \
                                            cudaStream_t, std::int32_t);
LEVERS_ROWS(float)
LEVERS_ROWS(double)

}  // namespace levers::kernels::cuda
