// The GPU's one elementwise kernel over broadcast strides: thread i takes
// element i of the output, finds each operand's element through the merged
// plan of levers/kernels/strided_plan.hpp (a division per merged dimension; none
// where the plan is one dimension, as for contiguous or scalar operands),
// and stores f(inputs...) in the output's type, computing in the
// accumulator type (float for bf16).
#pragma once

#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/strided_plan.hpp"

#include <utility>

namespace levers::kernels::cuda {

// A plan as a kernel argument.
template <int N> struct Strided {
    int ndim = 0;
    index_t size[Shape::kMaxDims] = {};
    index_t stride[N][Shape::kMaxDims] = {};

    __device__ void offsets(index_t i, index_t (&at)[N]) const {
        for (int k = 0; k < N; ++k) at[k] = 0;
        if (ndim == 1) {
            for (int k = 0; k < N; ++k) at[k] = i * stride[k][0];
            return;
        }
        for (int d = ndim - 1; d >= 0; --d) {
            const index_t c = i % size[d];
            i /= size[d];
            for (int k = 0; k < N; ++k) at[k] += c * stride[k][d];
        }
    }
};

template <int N> Strided<N> strided_of(const StridedLoop<N>& l) {
    Strided<N> s;
    s.ndim = l.ndim;
    for (int d = 0; d < l.ndim; ++d) {
        s.size[d] = l.size[static_cast<std::size_t>(d)];
        for (int k = 0; k < N; ++k) s.stride[k][d] = l.stride[static_cast<std::size_t>(k)][static_cast<std::size_t>(d)];
    }
    return s;
}

template <int N, class F, class Out, class... In, std::size_t... K>
__device__ void apply_at(std::index_sequence<K...>, const index_t (&at)[N], const F& f, Out* out, const In*... in) {
    out[at[0]] = store<Out>(f(load(in[at[K + 1]])...));
}

template <int N, class F, class Out, class... In>
__global__ void strided_kernel(Strided<N> plan, index_t n, F f, Out* out, const In*... in) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    index_t at[N];
    plan.offsets(i, at);
    apply_at<N>(std::index_sequence_for<In...>{}, at, f, out, in...);
}

template <class T> using ArgOf = const TensorArg&;

// out[i] = f(in[i]...) over out's elements, each input broadcast to out's
// shape; Out and In are the storage types.
template <class Out, class... In, class F>
void map_strided(cudaStream_t stream, const TensorArg& out, F f, ArgOf<In>... in) {
    constexpr int N = 1 + sizeof...(In);
    const StridedLoop<N> l = plan_loop<N>(out.shape, {out.strides, broadcast_strides(in, out.shape)...});
    if (l.numel == 0) return;
    constexpr int kThreads = 256;
    LEVERS_LAUNCH(strided_kernel<N><<<blocks_for(l.numel, kThreads), kThreads, 0, stream>>>(
        strided_of(l), l.numel, f, static_cast<Out*>(out.data), static_cast<const In*>(in.data)...));
}

}  // namespace levers::kernels::cuda
