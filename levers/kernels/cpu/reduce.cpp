// The CPU's reduction kernel (levers/core/generic_calls.hpp, ReduceCall):
// sums, maxima and minima over any dimensions of a strided tensor. The
// dimensions kept and those reduced are merged where memory allows, then one
// of three loops runs: along contiguous rows (the reduced dimensions are
// innermost), down columns (the kept ones are: a bias gradient), or a
// general walk. Sums of f32 rows add blocks in float and the blocks in
// double, in a fixed order: the same result every run, whatever the threads.
#include "levers/core/error.hpp"
#include "levers/core/generic_calls.hpp"
#include "levers/core/storage_pool.hpp"
#include "levers/core/threads.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"
#include "levers/kernels/elementwise_math.hpp"

#include <cstdint>
#include <limits>

namespace levers::kernels::cpu {

namespace {

using Mode = ReduceCall::Mode;

// Sums in double for f32 blocks, in T otherwise.
template <class T> using Wide = std::conditional_t<std::is_same_v<T, float>, double, T>;

// A running result: the value so far and where it was found.
template <class T> struct Best {
    T value;
    std::int32_t index = 0;
};

// Whether `x` replaces `best` (math::replaces_extreme: NaN wins, the first of equals stays).
template <class T> bool better(Mode mode, T x, T best) { return math::replaces_extreme(x, best, mode == Mode::max); }

// One contiguous run of n values.
template <class T> Wide<T> sum_run(const T* x, index_t n) {
    constexpr index_t kBlock = 512;
    Wide<T> total = 0;
    for (index_t start = 0; start < n; start += kBlock) {
        const index_t end = std::min(n, start + kBlock);
        T block = 0;
#pragma omp simd reduction(+ : block)
        for (index_t i = start; i < end; ++i) block += x[i];
        total += block;
    }
    return total;
}
template <class T> Best<T> extreme_run(Mode mode, const T* x, index_t n, index_t stride, index_t first_index) {
    Best<T> best{x[0], static_cast<std::int32_t>(first_index)};
    for (index_t i = 1; i < n; ++i)
        if (better(mode, x[i * stride], best.value)) best = {x[i * stride], static_cast<std::int32_t>(first_index + i)};
    return best;
}

// The reduced elements of one output, at `base`, by the general walk: a run
// along the innermost reduced dimension at a time (vectorised where it is
// contiguous: a bias gradient's sum over the batch and the positions), the
// runs in order, so the first of equal extremes is kept.
template <class T> Best<Wide<T>> reduce_walk(Mode mode, const T* base, const ReducePlan& p) {
    const int last = p.reduced_ndim - 1;  // -1: nothing reduced, one element (a copy)
    const index_t run = last >= 0 ? p.reduced_size[static_cast<std::size_t>(last)] : 1;
    const index_t step = last >= 0 ? p.reduced_stride[static_cast<std::size_t>(last)] : 0;
    std::array<index_t, Shape::kMaxDims> at{};
    Best<Wide<T>> best{mode == Mode::sum ? Wide<T>(0) : Wide<T>(base[0]), 0};
    index_t offset = 0;
    for (index_t first = 0; first < p.reduced_numel; first += run) {
        const T* x = base + offset;
        if (mode == Mode::sum) {
            if (step == 1) {
                best.value += sum_run(x, run);
            } else {
                for (index_t i = 0; i < run; ++i) best.value += x[i * step];
            }
        } else {
            const Best<T> b = extreme_run(mode, x, run, step, first);
            if (first == 0 || better<Wide<T>>(mode, b.value, best.value)) best = {b.value, b.index};
        }
        for (int d = last - 1; d >= 0; --d) {
            const auto u = static_cast<std::size_t>(d);
            offset += p.reduced_stride[u];
            if (++at[u] < p.reduced_size[u]) break;
            offset -= at[u] * p.reduced_stride[u];
            at[u] = 0;
        }
    }
    return best;
}

template <class T> void store(const ReduceCall& c, index_t out_at, Best<Wide<T>> r) {
    c.out.as<T>()[out_at] = static_cast<T>(c.mode == Mode::sum ? r.value * static_cast<Wide<T>>(c.scale) : r.value);
    if (c.index.defined()) c.index.as<std::int32_t>()[out_at] = r.index;
}

// Where output o's elements start, for operand k of a loop over the outputs.
template <int N> index_t offset_of(const StridedLoop<N>& l, index_t o, int k) {
    index_t at = 0;
    for (int d = l.ndim - 1; d >= 0; --d) {
        const auto u = static_cast<std::size_t>(d);
        at += (o % l.size[u]) * l.stride[static_cast<std::size_t>(k)][u];
        o /= l.size[u];
    }
    return at;
}

// Reduced elements innermost and contiguous: one run per output. Runs longer
// than two pieces of 64K elements are cut into such pieces (the threads'
// work where there are few outputs), whose results are combined in order:
// the same result whatever the number of threads.
template <class T> void reduce_rows(const ReduceCall& c, const ReducePlan& p) {
    constexpr index_t kPiece = 1 << 16;
    const T* in = c.in.as<const T>();
    const index_t n = p.reduced_numel;
    const StridedLoop<2> outputs = plan_loop<2>(p.kept_shape, {p.kept_out, p.kept_in});
    auto reduce_run = [&](const T* row, index_t len, index_t first) -> Best<Wide<T>> {
        if (c.mode == Mode::sum) return {sum_run(row, len), 0};
        const Best<T> b = extreme_run(c.mode, row, len, 1, first);
        return {b.value, b.index};
    };
    const index_t pieces = n > 2 * kPiece ? (n + kPiece - 1) / kPiece : 1;
    if (pieces == 1) {
        for_each_run(
            outputs,
            [&](const std::array<index_t, 2>& at, index_t count) {
                for (index_t i = 0; i < count; ++i)
                    store<T>(c, at[0] + i * outputs.inner(0), reduce_run(in + at[1] + i * outputs.inner(1), n, 0));
            },
            n);
        return;
    }
    // Each piece's result, [outputs, pieces], from the pool (nothing allocated in a steady step).
    const index_t tasks = outputs.numel * pieces;
    const std::shared_ptr<std::byte> scratch = cpu_pool().take(static_cast<std::size_t>(tasks) * sizeof(Best<Wide<T>>));
    auto* part = reinterpret_cast<Best<Wide<T>>*>(scratch.get());
    parallel_for(tasks, true, [&](index_t task) {
        const index_t o = task / pieces, begin = task % pieces * kPiece, len = std::min(n, begin + kPiece) - begin;
        part[task] = reduce_run(in + offset_of(outputs, o, 1) + begin, len, begin);
    });
    for (index_t o = 0; o < outputs.numel; ++o) {
        Best<Wide<T>> total = part[o * pieces];
        for (index_t k = 1; k < pieces; ++k) {
            const Best<Wide<T>>& b = part[o * pieces + k];
            if (c.mode == Mode::sum)
                total.value += b.value;
            else if (better<Wide<T>>(c.mode, b.value, total.value))
                total = b;
        }
        store<T>(c, offset_of(outputs, o, 0), total);
    }
}

// The kept elements innermost and contiguous, one reduced dimension: each
// output row is combined with the input's rows in turn, vectorised along it.
// Pieces of up to 2048 columns (8 KB of f32, kept in L1 while the rows
// stream by) are the tasks; long sums also split the rows into chunks of a
// fixed size, each chunk's partial sums added in chunk order afterwards: the
// same result whatever the number of threads.
template <class T> void reduce_columns(const ReduceCall& c, const ReducePlan& p) {
    constexpr index_t kPiece = 2048, kChunk = 2048;
    const int kd = p.kept_shape.ndim() - 1;
    const index_t width = p.kept_shape[kd];
    const index_t rows = p.reduced_size[0], row_stride = p.reduced_stride[0];
    const index_t outer = p.kept_shape.numel() / width;
    const index_t pieces = (width + kPiece - 1) / kPiece;
    const index_t chunks = c.mode == Mode::sum && rows >= 2 * kChunk ? (rows + kChunk - 1) / kChunk : 1;
    T* const out = c.out.as<T>();
    std::int32_t* const index = c.index.defined() ? c.index.as<std::int32_t>() : nullptr;
    const T* const in = c.in.as<const T>();
    // Each chunk's partial sums, [chunks, outer, width], from the pool (nothing allocated in a steady step).
    std::shared_ptr<std::byte> scratch;
    if (chunks > 1) scratch = cpu_pool().take(static_cast<std::size_t>(chunks * outer * width) * sizeof(T));
    T* const partial = reinterpret_cast<T*>(scratch.get());
    // Where outer element o starts in the input and the output.
    auto offsets = [&](index_t o, index_t& in_at, index_t& out_at) {
        in_at = out_at = 0;
        for (int d = kd - 1; d >= 0; --d) {
            const index_t size = p.kept_shape[d];
            in_at += (o % size) * p.kept_in[d];
            out_at += (o % size) * p.kept_out[d];
            o /= size;
        }
    };
    const index_t tasks = outer * pieces * chunks;
    parallel_for(tasks, rows * width >= (1 << 14), [&](index_t task) {
        const index_t chunk = task % chunks, piece = task / chunks % pieces, o = task / (chunks * pieces);
        index_t in_at = 0, out_at = 0;
        offsets(o, in_at, out_at);
        const index_t first = piece * kPiece, len = std::min(width, first + kPiece) - first;
        const index_t begin = chunk * kChunk, end = chunks > 1 ? std::min(rows, begin + kChunk) : rows;
        T* dst = chunks > 1 ? partial + (chunk * outer + o) * width + first : out + out_at + first;
        std::int32_t* where = index ? index + out_at + first : nullptr;
        const T* src = in + in_at + first;
        for (index_t i = 0; i < len; ++i) dst[i] = src[begin * row_stride + i];
        if (where)
            for (index_t i = 0; i < len; ++i) where[i] = static_cast<std::int32_t>(begin);
        for (index_t r = begin + 1; r < end; ++r) {
            const T* row = src + r * row_stride;
            if (c.mode == Mode::sum) {
#pragma omp simd
                for (index_t i = 0; i < len; ++i) dst[i] += row[i];
            } else {
                const auto at = static_cast<std::int32_t>(r);
                for (index_t i = 0; i < len; ++i) {
                    const bool take = better(c.mode, row[i], dst[i]);
                    dst[i] = take ? row[i] : dst[i];
                    if (where) where[i] = take ? at : where[i];
                }
            }
        }
    });
    // The chunks' sums in order, then the scale (a mean).
    const T scale = static_cast<T>(c.scale);
    if (c.mode != Mode::sum || (chunks == 1 && scale == T(1))) return;
    parallel_for(outer, outer * width >= (1 << 14), [&](index_t o) {
        index_t in_at = 0, out_at = 0;
        offsets(o, in_at, out_at);
        T* dst = out + out_at;
        if (chunks > 1) {
            const T* first = partial + o * width;
            for (index_t i = 0; i < width; ++i) dst[i] = first[i];
            for (index_t k = 1; k < chunks; ++k) {
                const T* next = partial + (k * outer + o) * width;
#pragma omp simd
                for (index_t i = 0; i < width; ++i) dst[i] += next[i];
            }
        }
        if (scale != T(1))
            for (index_t i = 0; i < width; ++i) dst[i] *= scale;
    });
}

template <class T> void reduce(const ReduceCall& c) {
    LEVERS_CHECK(c.out.contiguous(), "reduce: the output must be contiguous");
    LEVERS_CHECK(!c.index.defined() || c.mode != Mode::sum, "reduce: indices are kept for max and min only");
    const ReducePlan p = plan_reduce(c.out, c.in);
    if (p.kept_shape.numel() == 0) return;
    LEVERS_CHECK(p.reduced_numel > 0 || c.mode == Mode::sum, "reduce: the max or min of no elements");
    if (p.rows()) return reduce_rows<T>(c, p);
    if (p.columns() && p.kept_shape[p.kept_shape.ndim() - 1] >= 8) return reduce_columns<T>(c, p);
    // The general walk (also no reduced dimension at all: a copy).
    const T* in = c.in.as<const T>();
    const StridedLoop<2> outputs = plan_loop<2>(p.kept_shape, {p.kept_out, p.kept_in});
    for_each_run(
        outputs,
        [&](const std::array<index_t, 2>& at, index_t count) {
            for (index_t i = 0; i < count; ++i) {
                const T* base = in + at[1] + i * outputs.inner(1);
                store<T>(c, at[0] + i * outputs.inner(0),
                         p.reduced_numel == 0 ? Best<Wide<T>>{0, 0} : reduce_walk(c.mode, base, p));
            }
        },
        std::max<index_t>(1, p.reduced_numel));
}

LEVERS_KERNEL(ReduceCall, cpu, f32, reduce<float>);
LEVERS_KERNEL(ReduceCall, cpu, f64, reduce<double>);
LEVERS_KERNEL(ReduceCall, cpu, i32, reduce<std::int32_t>);

}  // namespace
}  // namespace levers::kernels::cpu
