// Building and indexing tensors, differentiable where PyTorch's are: gather
// and scatter_add (two kernels, "gather" and "scatter_add", on every
// backend), and what is made of them and of views and copies: index_select,
// cat, stack, split, chunk, one_hot, arange, full/zeros/ones_like, triu,
// tril, repeat, repeat_interleave. Indices are i32; an index out of range is
// a levers::Error naming the op, the index and the size, before any kernel runs.
#pragma once

#include "levers/core/kernel.hpp"

#include <cstdint>

namespace levers {

// "gather": out[i] = in[i with dimension `dim` replaced by index[i]], for
// every element i of out (contiguous, index's shape). in and index take any
// strides; index may repeat through stride 0 (index_select's broadcast).
struct GatherCall : KernelCallBase {
    static constexpr const char* kName = "gather";
    TensorArg out, in, index;
    std::int32_t dim = 0;
};
// "scatter_add": out[i with dimension `dim` replaced by index[i]] += src[i],
// for every element i of src; out contiguous, src and index (src's shape) any
// strides. Each line along `dim` is added in order: the same sums every run.
struct ScatterAddCall : KernelCallBase {
    static constexpr const char* kName = "scatter_add";
    TensorArg out, src, index;
    std::int32_t dim = 0;
};

}  // namespace levers

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

#include <initializer_list>
#include <vector>

namespace levers::ops {

// x's elements picked along `dim` by index (i32, x's number of dimensions,
// every other dimension no larger than x's): out has index's shape.
Tensor gather(const Tensor& x, int dim, const Tensor& index);
// A copy of x with src's elements added at the positions index names along
// `dim` (index has src's shape); differentiable in x and src.
Tensor scatter_add(const Tensor& x, int dim, const Tensor& index, const Tensor& src);
// The same into x itself (under InferenceMode, or for a gradient buffer).
void scatter_add_(const Tensor& x, int dim, const Tensor& index, const Tensor& src);
// The slices of x along `dim` that index (i32, one dimension) names, in its order.
Tensor index_select(const Tensor& x, int dim, const Tensor& index);

// x converted to `dtype` (PyTorch's x.to(dtype)), differentiable: the
// gradient comes back in x's dtype (bf16 logits scored in f32).
Tensor cast(const Tensor& x, DType dtype);

// Tensors of one dtype and device joined along `dim` (their other sizes equal).
Tensor cat(const std::vector<Tensor>& tensors, int dim = 0);
Tensor cat(std::initializer_list<Tensor> tensors, int dim = 0);  // cat({a, b}, -1), with no list on the heap
// Joined along a new dimension `dim` (equal shapes).
Tensor stack(const std::vector<Tensor>& tensors, int dim = 0);
// Views of x along `dim`: pieces of `size` (the last may be smaller), or
// `chunks` near-equal pieces (PyTorch's rule: ceil(n / chunks) each).
std::vector<Tensor> split(const Tensor& x, std::int64_t size, int dim = 0);
std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, int dim = 0);

// ids (i32, any shape, each in [0, classes)) as one-hot rows: [..., classes] in `dtype`.
Tensor one_hot(const Tensor& ids, std::int64_t classes, DType dtype = DType::f32);
// start, start + step, ... before end (i32, or any float dtype) on `device`.
Tensor arange(double start, double end, double step = 1, DType dtype = DType::i32, Device device = Device::cpu());
Tensor arange(std::int64_t n, DType dtype = DType::i32, Device device = Device::cpu());
// x's shape, dtype and device, every element `value` (0, 1).
Tensor full_like(const Tensor& x, double value);
Tensor zeros_like(const Tensor& x);
Tensor ones_like(const Tensor& x);
// The upper (lower) triangle of the last two dimensions from diagonal k (0:
// the main one; k > 0 above it), the rest zero; differentiable.
Tensor triu(const Tensor& x, std::int64_t k = 0);
Tensor tril(const Tensor& x, std::int64_t k = 0);
// x tiled: repeats[i] copies along dimension i (more repeats than dimensions add leading ones).
Tensor repeat(const Tensor& x, const std::vector<std::int64_t>& repeats);
// Each slice along `dim` repeated `repeats` times in place (GQA's key and value heads).
Tensor repeat_interleave(const Tensor& x, std::int64_t repeats, int dim);

// Checks that every index is in [-size, size) (negative ones count from the
// end, and are made positive); returns the indices beside `like`, contiguous.
Tensor checked_indices(const char* op, const Tensor& index, std::int64_t size, const Tensor& like);

}  // namespace levers::ops
#endif  // !__CUDACC__
