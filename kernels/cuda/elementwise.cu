// Element-wise ops on the card: GELU, residual add, scaling, conversions and
// the one-launch AdamW. The per-element maths is the CPU's (LEVERS_HD), run in
// the accumulator type.
#include "framework/core/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/gelu.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S> __global__ void gelu_forward_kernel(S* out, const S* in, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = store<S>(gelu_value(load(in[i])));
}

template <class S> __global__ void gelu_backward_kernel(S* d_in, const S* d_out, const S* in, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) d_in[i] = store<S>(load(d_out[i]) * gelu_grad(load(in[i])));
}

template <class S> __global__ void residual_kernel(S* out, const S* a, const S* b, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = store<S>(load(a[i]) + load(b[i]));
}

template <class S> __global__ void scale_kernel(S* x, acc_t<S> s, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] = store<S>(load(x[i]) * s);
}

template <class To, class From> __global__ void convert_kernel(To* to, const From* from, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) to[i] = store<To>(static_cast<acc_t<To>>(load(from[i])));
}

// One block per chunk; the chunk's decay flag picks the weight decay.
template <class T, class G>
__global__ void adamw_kernel(T* param, T* m, T* v, const G* grad, const AdamWChunk* chunks, T lr, T beta1, T beta2,
                             T eps, T wd, T bc1, T bc2) {
    const AdamWChunk chunk = chunks[blockIdx.x];
    const T decay = chunk.decay ? wd : T(0);
    for (int k = threadIdx.x; k < chunk.count; k += blockDim.x) {
        const std::int64_t i = chunk.start + k;
        adamw_element(param[i], m[i], v[i], static_cast<T>(load(grad[i])), lr, beta1, beta2, eps, decay, bc1, bc2);
    }
}

}  // namespace

template <class S> void gelu_forward(S* out, const S* in, index_t n, cudaStream_t stream) {
    if (n > 0) LEVERS_LAUNCH(gelu_forward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, in, n));
}

template <class S> void gelu_backward(S* d_in, const S* d_out, const S* in, index_t n, cudaStream_t stream) {
    if (n > 0)
        LEVERS_LAUNCH(gelu_backward_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(d_in, d_out, in, n));
}

template <class S> void residual_forward(S* out, const S* a, const S* b, index_t n, cudaStream_t stream) {
    if (n > 0) LEVERS_LAUNCH(residual_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n));
}

template <class S> void scale(S* x, acc_t<S> s, index_t n, cudaStream_t stream) {
    if (n > 0) LEVERS_LAUNCH(scale_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(x, s, n));
}

template <class To, class From> void convert(To* to, const From* from, index_t n, cudaStream_t stream) {
    if (n > 0)
        LEVERS_LAUNCH(convert_kernel<<<blocks_for(n, kThreads), kThreads, 0, stream>>>(to, from, n));
}

template <class T, class G>
void adamw_step(T* param, T* m, T* v, const G* grad, const AdamWChunk* chunks, index_t n_chunks, const AdamWHyper& h,
                long step, cudaStream_t stream) {
    if (n_chunks <= 0) return;
    // The bias corrections in double, as the CPU step computes them, then in T.
    const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
    LEVERS_LAUNCH(adamw_kernel<<<static_cast<unsigned>(n_chunks), kThreads, 0, stream>>>(
            param, m, v, grad, chunks, T(h.lr), T(h.beta1), T(h.beta2), T(h.eps), T(h.weight_decay), T(bc1), T(bc2)));
}

#define LEVERS_ELEMENTWISE(S)                                                        \
    template void gelu_forward<S>(S*, const S*, index_t, cudaStream_t);             \
    template void gelu_backward<S>(S*, const S*, const S*, index_t, cudaStream_t);  \
    template void residual_forward<S>(S*, const S*, const S*, index_t, cudaStream_t); \
    template void scale<S>(S*, acc_t<S>, index_t, cudaStream_t);
LEVERS_ELEMENTWISE(float)
LEVERS_ELEMENTWISE(double)
LEVERS_ELEMENTWISE(bf16)

template void convert<bf16, float>(bf16*, const float*, index_t, cudaStream_t);
template void convert<float, bf16>(float*, const bf16*, index_t, cudaStream_t);

#define LEVERS_ADAMW(T, G)                                                                                        \
    template void adamw_step<T, G>(T*, T*, T*, const G*, const AdamWChunk*, index_t, const AdamWHyper&, long, \
                                   cudaStream_t);
LEVERS_ADAMW(float, float)
LEVERS_ADAMW(float, bf16)
LEVERS_ADAMW(double, double)

}  // namespace levers::kernels::cuda
