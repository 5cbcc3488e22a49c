// gather and scatter_add on the CPU (levers/kernels/indexing.hpp). Indices were
// checked by the op before the kernel runs.
#include "levers/kernels/indexing.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"

#include <algorithm>
#include <cstdint>

namespace levers::kernels::cpu {

namespace {

template <class T> void gather(const GatherCall& c) {
    // Every operand walks out's shape; `in` steps along `dim` by the index instead.
    Strides in_strides = c.in.strides;
    in_strides[c.dim] = 0;
    const StridedLoop<3> l = plan_loop<3>(c.out.shape, {c.out.strides, in_strides, c.index.strides});
    T* const out = c.out.as<T>();
    const T* const in = c.in.as<const T>();
    const std::int32_t* const index = c.index.as<const std::int32_t>();
    const index_t along = c.in.strides[c.dim], so = l.inner(0), si = l.inner(1), sx = l.inner(2);
    for_each_run(l, [&](const std::array<index_t, 3>& at, index_t n) {
        T* po = out + at[0];
        const T* pi = in + at[1];
        const std::int32_t* px = index + at[2];
        for (index_t i = 0; i < n; ++i) po[i * so] = pi[i * si + px[i * sx] * along];
    });
}

// Parallel over the lines along `dim` (they write disjoint parts of out only
// where the index says so: lines of other coordinates never meet), each line
// in order.
template <class T> void scatter_add(const ScatterAddCall& c) {
    const int nd = c.src.shape.ndim(), dim = c.dim;
    std::array<index_t, Shape::kMaxDims> other{}, src_stride{}, index_stride{}, out_stride{};
    int k = 0;
    index_t lines = 1;
    for (int d = 0; d < nd; ++d) {
        if (d == dim) continue;
        const auto u = static_cast<std::size_t>(k++);
        other[u] = c.src.shape[d];
        src_stride[u] = c.src.strides[d];
        index_stride[u] = c.index.strides[d];
        out_stride[u] = c.out.strides[d];
        lines *= c.src.shape[d];
    }
    const index_t length = c.src.shape[dim];
    const index_t src_along = c.src.strides[dim], index_along = c.index.strides[dim], out_along = c.out.strides[dim];
    T* const out = c.out.as<T>();
    const T* const src = c.src.as<const T>();
    const std::int32_t* const index = c.index.as<const std::int32_t>();
    // A task is a block of a run of lines along the innermost other dimension: its start decoded once, not each
    // line's (a max-pool's backward has lines of one element). Within it the lines advance together, one
    // position along `dim` at a time, so rows of a matrix scattered along dim 0 are added as rows (contiguous),
    // not column by column; each element still takes its adds in index order.
    const auto last = static_cast<std::size_t>(std::max(k - 1, 0));
    const index_t run = k > 0 ? other[last] : 1;
    const index_t s_step = k > 0 ? src_stride[last] : 0, x_step = k > 0 ? index_stride[last] : 0,
                  o_step = k > 0 ? out_stride[last] : 0;
    constexpr index_t kBlock = 64;
    const index_t blocks = (run + kBlock - 1) / kBlock;
    parallel_for(lines / run * blocks, lines * length >= (1 << 15), [&](index_t task) {
        const index_t first = task % blocks * kBlock, count = std::min(kBlock, run - first);
        index_t rest = task / blocks, s_at = first * s_step, x_at = first * x_step, o_at = first * o_step;
        for (int d = k - 2; d >= 0; --d) {
            const auto u = static_cast<std::size_t>(d);
            const index_t i = rest % other[u];
            rest /= other[u];
            s_at += i * src_stride[u];
            x_at += i * index_stride[u];
            o_at += i * out_stride[u];
        }
        for (index_t j = 0; j < length; ++j) {
            const std::int32_t* px = index + x_at + j * index_along;
            const T* ps = src + s_at + j * src_along;
            T* po = out + o_at;
            for (index_t t = 0; t < count; ++t) po[px[t * x_step] * out_along + t * o_step] += ps[t * s_step];
        }
    });
}

LEVERS_KERNEL(GatherCall, cpu, f32, gather<float>);
LEVERS_KERNEL(GatherCall, cpu, f64, gather<double>);
LEVERS_KERNEL(GatherCall, cpu, i32, gather<std::int32_t>);
LEVERS_KERNEL(GatherCall, cpu, boolean, gather<bool>);
LEVERS_KERNEL(ScatterAddCall, cpu, f32, scatter_add<float>);
LEVERS_KERNEL(ScatterAddCall, cpu, f64, scatter_add<double>);
LEVERS_KERNEL(ScatterAddCall, cpu, i32, scatter_add<std::int32_t>);

}  // namespace
}  // namespace levers::kernels::cpu
