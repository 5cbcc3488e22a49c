// Walking the elements of a shape through several operands' strides at once,
// the CPU's one loop for every elementwise kernel (and the copies that make
// tensors contiguous), over a plan of merged dimensions (levers/kernels/strided_plan.hpp),
// so the body sees long runs with a fixed step per operand, usually 1 or 0,
// which it can vectorise.
#pragma once

#include "levers/core/threads.hpp"
#include "levers/kernels/strided_plan.hpp"

#include <algorithm>
#include <array>

namespace levers::kernels::cpu {

// Calls run(offsets, count) for consecutive pieces of the loop's runs, in
// elements from each operand's start: element i of the piece is at
// offsets[k] + i · l.inner(k). Large loops are split over the OpenMP
// threads by element ranges (a single long run is shared too); `cost` is the
// work per element, in elements' worth (a reduction's row length), for that choice.
template <int N, class Run> void for_each_run(const StridedLoop<N>& l, Run&& run, index_t cost = 1) {
    if (l.numel == 0) return;
    const index_t length = l.run();
    auto range = [&](index_t begin, index_t end) {
        // Where `begin` is: its index along each dimension and each operand's offset.
        std::array<index_t, Shape::kMaxDims> at{};
        std::array<index_t, N> offset{};
        index_t rest = begin;
        for (int d = l.ndim - 1; d >= 0; --d) {
            const auto u = static_cast<std::size_t>(d);
            at[u] = rest % l.size[u];
            rest /= l.size[u];
            for (int k = 0; k < N; ++k) offset[static_cast<std::size_t>(k)] += at[u] * l.stride[static_cast<std::size_t>(k)][u];
        }
        index_t i = begin;
        while (i < end) {
            const index_t pos = l.ndim == 0 ? 0 : at[static_cast<std::size_t>(l.ndim - 1)];
            const index_t count = std::min(length - pos, end - i);
            run(offset, count);
            i += count;
            if (i >= end) break;
            // Step to the next run: the innermost dimension starts again, the next outer one advances.
            const auto inner = static_cast<std::size_t>(l.ndim - 1);
            for (int k = 0; k < N; ++k) offset[static_cast<std::size_t>(k)] -= pos * l.stride[static_cast<std::size_t>(k)][inner];
            at[inner] = 0;
            for (int d = l.ndim - 2; d >= 0; --d) {
                const auto u = static_cast<std::size_t>(d);
                ++at[u];
                for (int k = 0; k < N; ++k) offset[static_cast<std::size_t>(k)] += l.stride[static_cast<std::size_t>(k)][u];
                if (at[u] < l.size[u]) break;
                for (int k = 0; k < N; ++k) offset[static_cast<std::size_t>(k)] -= at[u] * l.stride[static_cast<std::size_t>(k)][u];
                at[u] = 0;
            }
        }
    };
    // Below this, threads cost more than they save.
    constexpr index_t kParallel = 1 << 15;
    const int workers = l.numel * cost >= kParallel ? std::max(1, threads()) : 1;
    if (workers == 1) return range(0, l.numel);
    // Pieces of whole cache lines (16 floats) per thread, or as even as the elements allow.
    const index_t per = cost == 1 ? (l.numel / workers + 15) / 16 * 16 : (l.numel + workers - 1) / workers;
#pragma omp parallel for schedule(static) num_threads(workers)
    for (int t = 0; t < workers; ++t) {
        const index_t begin = std::min(l.numel, t * per), end = t == workers - 1 ? l.numel : std::min(l.numel, (t + 1) * per);
        if (begin < end) range(begin, end);
    }
}

// body(i) for i in [0, n): spread over the OpenMP threads where `worth_it`,
// else a plain loop. (A parallel region of another size than the last one's,
// or an `if` clause turning one off, makes OpenMP allocate a team: steady
// steps must not, so small loops never enter one.)
template <class Body> void parallel_for(index_t n, bool worth_it, Body&& body) {
    if (!worth_it || n < 2 || threads() == 1) {
        for (index_t i = 0; i < n; ++i) body(i);
        return;
    }
#pragma omp parallel for schedule(static)
    for (index_t i = 0; i < n; ++i) body(i);
}

// A flat pass over n elements (an optimizer's update, a scale, a norm) runs on
// this thread below 64K elements or with one thread: a small model's tensors
// are a few thousand elements, and a parallel region would cost more than the
// pass. Above, blocks of kFlatBlock go to the threads.
constexpr index_t kFlatBlock = index_t{1} << 14;
inline bool flat_parallel(index_t n) { return n >= (index_t{1} << 16) && threads() > 1; }

// body(begin, end) over [0, n): once, or a block at a time on the threads (flat_parallel).
template <class Body> void for_flat_blocks(index_t n, Body&& body) {
    if (!flat_parallel(n)) return body(index_t{0}, n);
    parallel_for((n + kFlatBlock - 1) / kFlatBlock, true,
                 [&](index_t b) { body(b * kFlatBlock, std::min(n, (b + 1) * kFlatBlock)); });
}

}  // namespace levers::kernels::cpu
