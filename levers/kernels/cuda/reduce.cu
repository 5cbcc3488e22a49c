// The GPU's reduction kernel (levers/core/generic_calls.hpp, ReduceCall)
// on the plan of levers/kernels/strided_plan.hpp: along contiguous rows (a warp per
// piece of a row), down columns (a thread per column, coalesced), anything
// else copied into rows first. Long reductions are split into pieces whose
// partial results are combined in order by a second kernel: no atomics, the
// same result every run. Sums run in the accumulator type (f32 for bf16);
// max and min keep the first position of the chosen element, NaN first.
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/strided.cuh"
#include "levers/core/generic_calls.hpp"

#include <cstdint>

namespace levers::kernels::cuda {

namespace {

using Mode = ReduceCall::Mode;
constexpr int kThreads = 256, kWarps = kThreads / 32;

// A partial result: the value so far and where it was found.
template <class A> struct Best {
    A value;
    std::int32_t index;
};

template <class A> __device__ bool nan(A x) { return x != x; }
// Whether `b` replaces `a`: NaN first, then the larger (smaller), then the earlier.
template <class A> __device__ bool takes(Mode mode, Best<A> a, Best<A> b) {
    if (nan(a.value) || nan(b.value)) return nan(b.value) && (!nan(a.value) || b.index < a.index);
    if (b.value == a.value) return b.index < a.index;
    return mode == Mode::max ? b.value > a.value : b.value < a.value;
}
template <class A> __device__ Best<A> combine(Mode mode, Best<A> a, Best<A> b) {
    if (mode == Mode::sum) return {a.value + b.value, 0};
    return takes(mode, a, b) ? b : a;
}
template <class A> __device__ Best<A> warp_combine(Mode mode, Best<A> x) {
    for (int offset = 16; offset > 0; offset /= 2) {
        const Best<A> other{__shfl_xor_sync(kFullWarp, x.value, offset), __shfl_xor_sync(kFullWarp, x.index, offset)};
        x = combine(mode, x, other);
    }
    return x;
}

// Each warp reduces `length` elements (`step` apart) of one row piece; piece
// p of output o reads in + offset(o) + p·chunk·step. Results go to out/index
// where `pieces` is 1, else to partial [outputs, pieces].
template <class S>
__global__ void rows_kernel(S* out, std::int32_t* index, Best<acc_t<S>>* partial, const S* in, Strided<2> outputs,
                            index_t n_outputs, index_t length, index_t step, index_t chunk, index_t pieces, Mode mode,
                            acc_t<S> scale) {
    using A = acc_t<S>;
    const index_t task = blockIdx.x * static_cast<index_t>(kWarps) + threadIdx.x / 32;
    const unsigned lane = threadIdx.x % 32;
    if (task >= n_outputs * pieces) return;  // whole warps leave together
    const index_t o = task / pieces, piece = task % pieces;
    index_t at[2];
    outputs.offsets(o, at);
    const index_t begin = piece * chunk, end = begin + chunk < length ? begin + chunk : length;
    const S* row = in + at[1];
    Best<A> b{mode == Mode::sum ? A(0) : load(row[begin * step]), static_cast<std::int32_t>(begin)};
    for (index_t i = begin + lane; i < end; i += 32) b = combine(mode, b, Best<A>{load(row[i * step]), static_cast<std::int32_t>(i)});
    b = warp_combine(mode, b);
    if (lane != 0) return;
    if (pieces > 1) {
        partial[task] = b;
        return;
    }
    out[at[0]] = store<S>(mode == Mode::sum ? b.value * scale : b.value);
    if (index) index[at[0]] = b.index;
}

// Each output's pieces combined in order.
template <class S>
__global__ void pieces_kernel(S* out, std::int32_t* index, const Best<acc_t<S>>* partial, Strided<2> outputs,
                              index_t n_outputs, index_t pieces, Mode mode, acc_t<S> scale) {
    const index_t o = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    if (o >= n_outputs) return;
    Best<acc_t<S>> b = partial[o * pieces];
    for (index_t p = 1; p < pieces; ++p) b = combine(mode, b, partial[o * pieces + p]);
    index_t at[2];
    outputs.offsets(o, at);
    out[at[0]] = store<S>(mode == Mode::sum ? b.value * scale : b.value);
    if (index) index[at[0]] = b.index;
}

// Down columns: thread (column c of outer o, piece p) combines rows
// [p·chunk, ...) of `rows`, `row_stride` apart.
template <class S>
__global__ void columns_kernel(S* out, std::int32_t* index, Best<acc_t<S>>* partial, const S* in, Strided<2> outer,
                               index_t n_outer, index_t width, index_t rows, index_t row_stride, index_t chunk,
                               index_t pieces, Mode mode, acc_t<S> scale) {
    using A = acc_t<S>;
    const index_t col = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x;
    const index_t o = blockIdx.y, piece = blockIdx.z;
    if (col >= width || o >= n_outer) return;
    index_t at[2];
    outer.offsets(o, at);
    const S* src = in + at[1] + col;
    const index_t begin = piece * chunk, end = begin + chunk < rows ? begin + chunk : rows;
    Best<A> b{mode == Mode::sum ? A(0) : load(src[begin * row_stride]), static_cast<std::int32_t>(begin)};
    for (index_t r = begin + (mode == Mode::sum ? 0 : 1); r < end; ++r)
        b = combine(mode, b, Best<A>{load(src[r * row_stride]), static_cast<std::int32_t>(r)});
    if (pieces > 1) {
        partial[(o * width + col) * pieces + piece] = b;
        return;
    }
    out[at[0] + col] = store<S>(mode == Mode::sum ? b.value * scale : b.value);
    if (index) index[at[0] + col] = b.index;
}

// Pieces so that a reduction of `length` spreads over enough warps (or threads).
index_t pieces_for(index_t outputs, index_t length, index_t min_chunk) {
    constexpr index_t kWanted = 4096;
    if (outputs >= kWanted || length <= min_chunk) return 1;
    const index_t most = (length + min_chunk - 1) / min_chunk;
    const index_t want = (kWanted + outputs - 1) / outputs;
    return want < most ? want : most;
}

template <class S> void reduce_rows(const ReduceCall& c, const ReducePlan& p, const S* in, index_t step) {
    using A = acc_t<S>;
    const StridedLoop<2> l = plan_loop<2>(p.kept_shape, {p.kept_out, p.kept_in});
    const Strided<2> outputs = strided_of(l);
    const index_t n = l.numel, length = p.reduced_numel;
    const index_t pieces = pieces_for(n, length, 1024), chunk = (length + pieces - 1) / pieces;
    const cudaStream_t s = stream_of(c);
    Scratch<Best<A>> partial(pieces > 1 ? static_cast<std::size_t>(n * pieces) : 1);
    std::int32_t* index = c.index.defined() ? ptr<std::int32_t>(c.index) : nullptr;
    const A scale = static_cast<A>(c.scale);
    LEVERS_LAUNCH(rows_kernel<S><<<blocks_for(n * pieces, kWarps), kThreads, 0, s>>>(
        ptr<S>(c.out), index, partial.get(), in, outputs, n, length, step, chunk, pieces, c.mode, scale));
    if (pieces > 1)
        LEVERS_LAUNCH(pieces_kernel<S><<<blocks_for(n, kThreads), kThreads, 0, s>>>(
            ptr<S>(c.out), index, partial.get(), outputs, n, pieces, c.mode, scale));
}

template <class S> void reduce_columns(const ReduceCall& c, const ReducePlan& p) {
    using A = acc_t<S>;
    const int kd = p.kept_shape.ndim() - 1;
    const index_t width = p.kept_shape[kd], rows = p.reduced_size[0];
    // The outer kept dimensions (all but the innermost) as one plan.
    Shape outer_shape;
    for (int d = 0; d < kd; ++d) outer_shape = outer_shape.appended(p.kept_shape[d]);
    const StridedLoop<2> l = plan_loop<2>(outer_shape, {p.kept_out, p.kept_in});
    const index_t n_outer = l.numel;
    const index_t pieces = pieces_for(n_outer * width, rows, 64), chunk = (rows + pieces - 1) / pieces;
    const cudaStream_t s = stream_of(c);
    Scratch<Best<A>> partial(pieces > 1 ? static_cast<std::size_t>(n_outer * width * pieces) : 1);
    std::int32_t* index = c.index.defined() ? ptr<std::int32_t>(c.index) : nullptr;
    const A scale = static_cast<A>(c.scale);
    const dim3 grid(blocks_for(width, kThreads), static_cast<unsigned>(n_outer), static_cast<unsigned>(pieces));
    LEVERS_LAUNCH(columns_kernel<S><<<grid, kThreads, 0, s>>>(ptr<S>(c.out), index, partial.get(), ptr<const S>(c.in),
                                                             strided_of(l), n_outer, width, rows, p.reduced_stride[0],
                                                             chunk, pieces, c.mode, scale));
    if (pieces > 1) {
        // The partials as [outer · width, pieces] rows, each output's in order.
        Shape all = outer_shape.appended(width);
        const StridedLoop<2> outputs = plan_loop<2>(all, {p.kept_out, Strides::contiguous(all)});
        LEVERS_LAUNCH(pieces_kernel<S><<<blocks_for(n_outer * width, kThreads), kThreads, 0, s>>>(
            ptr<S>(c.out), index, partial.get(), strided_of(outputs), n_outer * width, pieces, c.mode, scale));
    }
}

template <class C> struct CopyF {
    __device__ C operator()(C x) const { return x; }
};
template <class C> struct ZeroF {
    __device__ C operator()() const { return C(0); }
};

template <class S> void reduce(const ReduceCall& c) {
    const ReducePlan p = plan_reduce(c.out, c.in);
    if (p.kept_shape.numel() == 0) return;
    if (p.reduced_numel == 0) {  // a sum of nothing
        map_strided<S>(stream_of(c), c.out, ZeroF<acc_t<S>>{});
        return;
    }
    if (p.rows()) return reduce_rows<S>(c, p, ptr<const S>(c.in), 1);
    if (p.columns() && p.kept_shape[p.kept_shape.ndim() - 1] >= 32 && p.kept_shape.numel() / p.kept_shape[p.kept_shape.ndim() - 1] <= 65535)
        return reduce_columns<S>(c, p);
    if (p.reduced_ndim == 1) return reduce_rows<S>(c, p, ptr<const S>(c.in), p.reduced_stride[0]);
    // Anything else: copied with the reduced dimensions innermost, then along rows.
    Shape rows_shape = p.kept_shape;
    Strides in_strides = p.kept_in;
    for (int r = 0; r < p.reduced_ndim; ++r) {
        in_strides[rows_shape.ndim()] = p.reduced_stride[static_cast<std::size_t>(r)];
        rows_shape = rows_shape.appended(p.reduced_size[static_cast<std::size_t>(r)]);
    }
    Scratch<S> rows(static_cast<std::size_t>(rows_shape.numel()));
    const TensorArg dst{rows.get(), rows_shape, Strides::contiguous(rows_shape), c.in.dtype};
    const TensorArg src{c.in.data, rows_shape, in_strides, c.in.dtype};
    map_strided<S, S>(stream_of(c), dst, CopyF<acc_t<S>>{}, src);
    ReducePlan packed = p;
    packed.kept_in = Strides::contiguous(p.kept_shape);
    for (int d = 0; d < p.kept_shape.ndim(); ++d) packed.kept_in[d] *= p.reduced_numel;
    packed.reduced_ndim = 1;
    packed.reduced_size[0] = p.reduced_numel;
    packed.reduced_stride[0] = 1;
    reduce_rows<S>(c, packed, rows.get(), 1);
}

LEVERS_CUDA_KERNELS(ReduceCall, reduce);
LEVERS_KERNEL(ReduceCall, cuda, i32, reduce<std::int32_t>);

}  // namespace
}  // namespace levers::kernels::cuda
