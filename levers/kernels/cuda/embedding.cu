// Token and position embeddings on the GPU. The token table's gradient
// gathers every position holding the same token: positions are sorted by
// token (a stable radix sort, so each token's positions stay in order) and
// one thread per (token run, channel) sums its run in the accumulator type,
// then adds once. No atomics: the same sums every run.
#include "levers/kernels/embedding.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S>
__global__ void embedding_forward_kernel(S* out, const std::int32_t* tokens, const S* wte, const S* wpe, index_t bt,
                                         index_t time, index_t c) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= bt * c) return;
    const index_t row = i / c, ch = i % c;
    acc_t<S> v = load(wte[static_cast<index_t>(tokens[row]) * c + ch]);
    if (wpe) v += load(wpe[(row % time) * c + ch]);  // no table: a plain lookup
    out[i] = store<S>(v);
}

// d_wpe[t, ch] += Σ_b d_out[b, t, ch].
template <class S>
__global__ void position_grad_kernel(S* d_wpe, const S* d_out, index_t batch, index_t time, index_t c) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= time * c) return;
    acc_t<S> s = 0;
    for (index_t b = 0; b < batch; ++b) s += load(d_out[b * time * c + i]);
    d_wpe[i] = store<S>(load(d_wpe[i]) + s);
}

// Block (x: position in sorted order, y: channel block); only the first
// position of each token's run works.
template <class S>
__global__ void token_grad_kernel(S* d_wte, const S* d_out, const std::int32_t* sorted_tokens,
                                  const std::int32_t* sorted_rows, index_t bt, index_t c) {
    const index_t i = blockIdx.x, ch = blockIdx.y * static_cast<index_t>(blockDim.x) + threadIdx.x;
    const std::int32_t token = sorted_tokens[i];
    if (ch >= c || (i > 0 && sorted_tokens[i - 1] == token)) return;
    acc_t<S> s = 0;
    for (index_t j = i; j < bt && sorted_tokens[j] == token; ++j) s += load(d_out[sorted_rows[j] * c + ch]);
    S* g = d_wte + static_cast<index_t>(token) * c + ch;
    *g = store<S>(load(*g) + s);
}

__global__ void iota_kernel(std::int32_t* rows, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) rows[i] = static_cast<std::int32_t>(i);
}

}  // namespace

template <class S>
void embedding_forward(S* out, const std::int32_t* tokens, const S* wte, const S* wpe, index_t batch, index_t time,
                       index_t channels, cudaStream_t stream) {
    const index_t bt = batch * time;
    if (bt <= 0) return;
    LEVERS_LAUNCH(embedding_forward_kernel<<<blocks_for(bt * channels, kThreads), kThreads, 0, stream>>>(
        out, tokens, wte, wpe, bt, time, channels));
}

template <class S>
void embedding_backward(S* d_wte, S* d_wpe, const S* d_out, const std::int32_t* tokens, index_t batch, index_t time,
                        index_t channels, cudaStream_t stream) {
    const index_t bt = batch * time;
    if (bt <= 0) return;
    if (d_wpe)
        LEVERS_LAUNCH(position_grad_kernel<<<blocks_for(time * channels, kThreads), kThreads, 0, stream>>>(
            d_wpe, d_out, batch, time, channels));
    if (!d_wte) return;
    const auto n = static_cast<std::size_t>(bt);
    Scratch<std::int32_t> rows(n), sorted_tokens(n), sorted_rows(n);
    LEVERS_LAUNCH(iota_kernel<<<blocks_for(bt, kThreads), kThreads, 0, stream>>>(rows.get(), bt));
    std::size_t temp_bytes = 0;
    const int count = static_cast<int>(bt);
    LEVERS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, tokens, sorted_tokens.get(), rows.get(),
                                                      sorted_rows.get(), count, 0, 32, stream));
    Scratch<std::byte> temp(temp_bytes);
    LEVERS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp.get(), temp_bytes, tokens, sorted_tokens.get(), rows.get(),
                                                      sorted_rows.get(), count, 0, 32, stream));
    const dim3 grid(static_cast<unsigned>(bt), blocks_for(channels, kThreads));
    LEVERS_LAUNCH(token_grad_kernel<<<grid, kThreads, 0, stream>>>(d_wte, d_out, sorted_tokens.get(),
                                                                   sorted_rows.get(), bt, channels));
}

#define LEVERS_EMBEDDING(S)                                                                                     \
    template void embedding_forward<S>(S*, const std::int32_t*, const S*, const S*, index_t, index_t, index_t,  \
                                       cudaStream_t);                                                          \
    template void embedding_backward<S>(S*, S*, const S*, const std::int32_t*, index_t, index_t, index_t,       \
                                        cudaStream_t);
LEVERS_EMBEDDING(float)
LEVERS_EMBEDDING(double)
LEVERS_EMBEDDING(bf16)

namespace {
template <class S> void embedding_call(const EmbeddingCall& c) {
    const auto& tokens = c.tokens.shape;
    embedding_forward(ptr<S>(c.out), ptr<const std::int32_t>(c.tokens), ptr<const S>(c.wte), ptr<const S>(c.wpe),
                      tokens.rows(), tokens.last(), c.wte.shape[1], stream_of(c));
}
template <class S> void embedding_grad_call(const EmbeddingBackwardCall& c) {
    const auto& tokens = c.tokens.shape;
    embedding_backward(ptr<S>(c.d_wte), ptr<S>(c.d_wpe), ptr<const S>(c.d_out), ptr<const std::int32_t>(c.tokens),
                       tokens.rows(), tokens.last(), c.d_out.shape.last(), stream_of(c));
}
LEVERS_CUDA_KERNELS(EmbeddingCall, embedding_call);
LEVERS_CUDA_KERNELS(EmbeddingBackwardCall, embedding_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
