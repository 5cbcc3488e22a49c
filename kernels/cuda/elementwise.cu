// Element-wise ops on the card: GELU, residual add, fused AdamW.
#include "framework/core/cuda_check.hpp"
#include "kernels/cuda/ops.hpp"
#include "kernels/gelu.hpp"

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;
unsigned blocks_for(index_t n) { return static_cast<unsigned>((n + kThreads - 1) / kThreads); }

template <class T> __global__ void gelu_forward_kernel(T* out, const T* in, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = gelu_value(in[i]);
}

template <class T> __global__ void gelu_backward_kernel(T* d_in, const T* d_out, const T* in, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) d_in[i] = d_out[i] * gelu_grad(in[i]);
}

template <class T> __global__ void residual_kernel(T* out, const T* a, const T* b, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

template <class T> __global__ void scale_kernel(T* x, T s, index_t n) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) x[i] *= s;
}

template <class T>
__global__ void adamw_kernel(T* param, T* m, T* v, const T* grad, index_t n, T lr, T beta1, T beta2, T eps, T wd,
                             T bc1, T bc2) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i < n) adamw_element(param[i], m[i], v[i], grad[i], lr, beta1, beta2, eps, wd, bc1, bc2);
}

}  // namespace

template <class T> void gelu_forward(T* out, const T* in, index_t n, cudaStream_t stream) {
    if (n > 0) gelu_forward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, in, n);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T> void gelu_backward(T* d_in, const T* d_out, const T* in, index_t n, cudaStream_t stream) {
    if (n > 0) gelu_backward_kernel<<<blocks_for(n), kThreads, 0, stream>>>(d_in, d_out, in, n);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T> void residual_forward(T* out, const T* a, const T* b, index_t n, cudaStream_t stream) {
    if (n > 0) residual_kernel<<<blocks_for(n), kThreads, 0, stream>>>(out, a, b, n);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T> void scale(T* x, T s, index_t n, cudaStream_t stream) {
    if (n > 0) scale_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, s, n);
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
void adamw_step(T* param, T* m, T* v, const T* grad, index_t n, const AdamWHyper& h, long step, cudaStream_t stream) {
    if (n <= 0) return;
    // The bias corrections in double, as the CPU step computes them, then in T.
    const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
    adamw_kernel<<<blocks_for(n), kThreads, 0, stream>>>(param, m, v, grad, n, T(h.lr), T(h.beta1), T(h.beta2),
                                                         T(h.eps), T(h.weight_decay), T(bc1), T(bc2));
    LEVERS_CUDA_CHECK(cudaGetLastError());
}

#define LEVERS_ELEMENTWISE(T)                                                                                 \
    template void gelu_forward<T>(T*, const T*, index_t, cudaStream_t);                                      \
    template void gelu_backward<T>(T*, const T*, const T*, index_t, cudaStream_t);                           \
    template void residual_forward<T>(T*, const T*, const T*, index_t, cudaStream_t);                        \
    template void scale<T>(T*, T, index_t, cudaStream_t);                                                    \
    template void adamw_step<T>(T*, T*, T*, const T*, index_t, const AdamWHyper&, long, cudaStream_t);
LEVERS_ELEMENTWISE(float)
LEVERS_ELEMENTWISE(double)

}  // namespace levers::kernels::cuda
