// The plan of a walk over a shape through several operands' strides at once,
// shared by the backends' elementwise kernels: dimensions every operand
// steps through as one are merged first (a contiguous tensor is one run; a
// row broadcast over a matrix is runs of the row's length). No fmt here:
// the GPU's kernels include this.
#pragma once

#include "levers/core/kernel.hpp"
#include "levers/kernels/common.hpp"

#include <array>

namespace levers::kernels {

template <int N> struct StridedLoop {
    int ndim = 0;  // after merging; 0: one element
    std::array<index_t, Shape::kMaxDims> size{};
    std::array<std::array<index_t, Shape::kMaxDims>, N> stride{};
    index_t numel = 1;
    // The innermost dimension: runs of this length, operand k stepping inner(k).
    index_t run() const { return ndim == 0 ? 1 : size[static_cast<std::size_t>(ndim - 1)]; }
    index_t inner(int k) const { return ndim == 0 ? 0 : stride[static_cast<std::size_t>(k)][static_cast<std::size_t>(ndim - 1)]; }
};

// The loop over `shape` for operands with these strides (each broadcast to
// `shape` already: stride 0 where it repeats).
template <int N> StridedLoop<N> plan_loop(const Shape& shape, const std::array<Strides, N>& strides) {
    StridedLoop<N> l;
    l.numel = shape.numel();
    for (int d = 0; d < shape.ndim(); ++d) {
        const index_t size = shape[d];
        if (size == 1) continue;  // steps nowhere
        const auto at = static_cast<std::size_t>(l.ndim);
        bool merge = l.ndim > 0;
        for (int k = 0; k < N && merge; ++k)
            merge = l.stride[static_cast<std::size_t>(k)][at - 1] == strides[static_cast<std::size_t>(k)][d] * size;
        if (merge) {
            l.size[at - 1] *= size;
            for (int k = 0; k < N; ++k) l.stride[static_cast<std::size_t>(k)][at - 1] = strides[static_cast<std::size_t>(k)][d];
        } else {
            l.size[at] = size;
            for (int k = 0; k < N; ++k) l.stride[static_cast<std::size_t>(k)][at] = strides[static_cast<std::size_t>(k)][d];
            ++l.ndim;
        }
    }
    return l;
}

// An operand's strides broadcast to `shape` (trailing dimensions aligned;
// stride 0 where it has size 1 or no dimension).
inline Strides broadcast_strides(const TensorArg& t, const Shape& shape) {
    Strides s;
    const int shift = shape.ndim() - t.shape.ndim();
    for (int d = 0; d < shape.ndim(); ++d) {
        const int src = d - shift;
        s[d] = src < 0 || t.shape[src] == 1 ? 0 : t.strides[src];
    }
    return s;
}

// The dimensions of a reduction (levers/core/generic_calls.hpp,
// ReduceCall), merged: the kept ones (out's elements, with out's and in's
// strides) and the reduced ones (with in's, merged where memory allows).
struct ReducePlan {
    Shape kept_shape;
    Strides kept_in, kept_out;
    int reduced_ndim = 0;
    std::array<index_t, Shape::kMaxDims> reduced_size{}, reduced_stride{};
    index_t reduced_numel = 1;
    // Reduced elements innermost and contiguous: one run per output.
    bool rows() const { return reduced_ndim == 1 && reduced_stride[0] == 1; }
    // Kept elements innermost and contiguous, one reduced dimension: down columns.
    bool columns() const {
        const int k = kept_shape.ndim() - 1;
        return reduced_ndim == 1 && k >= 0 && kept_in[k] == 1 && kept_out[k] == 1;
    }
};

inline ReducePlan plan_reduce(const TensorArg& out, const TensorArg& in) {
    ReducePlan p;
    int k = 0;
    for (int d = 0; d < in.shape.ndim(); ++d) {
        const index_t size = in.shape[d];
        if (out.shape[d] == size) {
            p.kept_shape = p.kept_shape.appended(size);
            p.kept_out[k] = out.strides[d];
            p.kept_in[k] = in.strides[d];
            ++k;
        } else if (size != 1) {
            const auto r = static_cast<std::size_t>(p.reduced_ndim);
            if (r > 0 && p.reduced_stride[r - 1] == in.strides[d] * size) {
                p.reduced_size[r - 1] *= size;
                p.reduced_stride[r - 1] = in.strides[d];
            } else {
                p.reduced_size[r] = size;
                p.reduced_stride[r] = in.strides[d];
                ++p.reduced_ndim;
            }
            p.reduced_numel *= size;
        }
    }
    return p;
}

}  // namespace levers::kernels
