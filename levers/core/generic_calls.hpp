// The calls of the generic kernels, which every backend provides and most
// ops are made of: elementwise maps over broadcast strides, and reductions.
// Core uses a few of them itself (copies between layouts and dtypes, fills,
// the sums autograd adds gradients with and the one a broadcast's backward
// needs); levers/kernels/elementwise.hpp and levers/kernels/reduce.hpp make ops of the rest.
// No fmt here: the GPU's kernels include this.
#pragma once

#include "levers/core/kernel.hpp"

#include <array>
#include <cstdint>

namespace levers {

// Every elementwise kernel, by name: "copy" (converting dtypes; dispatched by
// the output's), "fill", "where", "logical_not", and each entry of
// levers/kernels/elementwise_math.hpp with its "<name>_backward" (dispatched by the
// inputs' dtype). Each input broadcasts to out's shape through its strides
// (trailing dimensions aligned, stride 0 where it repeats); out may have any
// strides and may be an input itself (the in-place forms), never overlap one
// otherwise.
struct ElementwiseCall : KernelCallBase {
    static constexpr int kInputs = 4;
    TensorArg out;
    // Inputs in the op's order (a unary backward: d_y, x, y; a binary
    // backward: d_y, a, b, y; where: mask, a, b). An input left undefined in
    // "where" stands for the scalar p[0] (a) or p[1] (b).
    std::array<TensorArg, kInputs> in{};
    std::array<double, 2> p{};  // the op's scalar parameters: x * p0, clamp(x, p0, p1), the fill value
    std::int32_t which = 0;     // a binary backward: 0 for ∂/∂a, 1 for ∂/∂b
};

// "reduce": out = the sum (times scale), maximum or minimum of `in` over the
// dimensions where out has size 1 and `in` does not. out is contiguous with
// in's number of dimensions (keepdim); in has any strides. Where `index` (i32,
// out's shape) is given, for max and min over one dimension, it receives the
// position along it of the first element chosen (NaN is chosen first).
struct ReduceCall : KernelCallBase {
    static constexpr const char* kName = "reduce";
    enum class Mode : std::int32_t { sum, max, min };
    TensorArg out, index, in;
    Mode mode = Mode::sum;
    double scale = 1;
};

}  // namespace levers
