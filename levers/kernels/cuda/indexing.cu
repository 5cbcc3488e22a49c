// gather and scatter_add on the GPU (levers/kernels/indexing.hpp): a thread per
// element gathered; a thread per line along the scattered dimension, adding
// its elements in order (no atomics: the same sums every run). Indices were
// checked on the host by the op.
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/strided.cuh"

#include <cstdint>

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

template <class S>
__global__ void gather_kernel(S* out, const S* in, const std::int32_t* index, Strided<3> plan, index_t n,
                              index_t along) {
    const index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (i >= n) return;
    index_t at[3];
    plan.offsets(i, at);
    out[at[0]] = in[at[1] + index[at[2]] * along];
}

template <class S> void gather_call(const GatherCall& c) {
    Strides in_strides = c.in.strides;
    in_strides[c.dim] = 0;  // the index says where along `dim`
    const StridedLoop<3> l = plan_loop<3>(c.out.shape, {c.out.strides, in_strides, c.index.strides});
    if (l.numel == 0) return;
    LEVERS_LAUNCH(gather_kernel<S><<<blocks_for(l.numel, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<const S>(c.in), ptr<const std::int32_t>(c.index), strided_of(l), l.numel,
        c.in.strides[c.dim]));
}

// Line `line` (src's coordinates but `dim`, through `lines`' plan) adds its
// `length` elements in order.
template <class S>
__global__ void scatter_add_kernel(S* out, const S* src, const std::int32_t* index, Strided<3> lines, index_t n_lines,
                                   index_t length, index_t out_along, index_t src_along, index_t index_along) {
    const index_t line = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (line >= n_lines) return;
    index_t at[3];
    lines.offsets(line, at);
    for (index_t j = 0; j < length; ++j) {
        S* dst = out + at[0] + index[at[2] + j * index_along] * out_along;
        *dst = store<S>(load(*dst) + load(src[at[1] + j * src_along]));
    }
}

template <class S> void scatter_add_call(const ScatterAddCall& c) {
    // The lines: src's shape without `dim`, and each operand's strides there.
    Shape shape;
    Strides s_out, s_src, s_index;
    for (int d = 0; d < c.src.shape.ndim(); ++d) {
        if (d == c.dim) continue;
        s_out[shape.ndim()] = c.out.strides[d];
        s_src[shape.ndim()] = c.src.strides[d];
        s_index[shape.ndim()] = c.index.strides[d];
        shape = shape.appended(c.src.shape[d]);
    }
    const StridedLoop<3> l = plan_loop<3>(shape, {s_out, s_src, s_index});
    if (l.numel == 0 || c.src.shape[c.dim] == 0) return;
    LEVERS_LAUNCH(scatter_add_kernel<S><<<blocks_for(l.numel, kThreads), kThreads, 0, stream_of(c)>>>(
        ptr<S>(c.out), ptr<const S>(c.src), ptr<const std::int32_t>(c.index), strided_of(l), l.numel,
        c.src.shape[c.dim], c.out.strides[c.dim], c.src.strides[c.dim], c.index.strides[c.dim]));
}

LEVERS_CUDA_KERNELS(GatherCall, gather_call);
LEVERS_KERNEL(GatherCall, cuda, i32, gather_call<std::int32_t>);
LEVERS_KERNEL(GatherCall, cuda, boolean, gather_call<bool>);
LEVERS_CUDA_KERNELS(ScatterAddCall, scatter_add_call);
LEVERS_KERNEL(ScatterAddCall, cuda, i32, scatter_add_call<std::int32_t>);

}  // namespace
}  // namespace levers::kernels::cuda
