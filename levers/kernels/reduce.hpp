// Reductions over any set of dimensions, differentiable: sum, mean, amax and
// amin, max and min along one dimension with the indices, argmax and argmin,
// var and std_dev, norm, logsumexp. `dims` may be negative (from the end);
// no dims means every dimension (a 0-d result, as PyTorch's x.sum()).
// keepdim keeps the reduced dimensions with size 1. Inputs may have any
// strides. One kernel does the work on every backend ("reduce",
// levers/core/generic_calls.hpp); the rest are compositions.
#pragma once

#include "levers/core/generic_calls.hpp"

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

namespace levers::ops {

// Σ and the mean over `dims` (all of them when empty).
Tensor sum(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
// The largest (smallest) element over `dims`; ties share the gradient evenly, as PyTorch's amax.
Tensor amax(const Tensor& x, const Dims& dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, const Dims& dims = {}, bool keepdim = false);

// The largest (smallest) element along `dim` and where it is (i32; the first
// of equals, NaN first); the gradient goes to that element.
struct ValuesIndices {
    Tensor values, indices;
};
ValuesIndices max(const Tensor& x, int dim, bool keepdim = false);
ValuesIndices min(const Tensor& x, int dim, bool keepdim = false);
// Where the largest (smallest) element is along `dim` (i32), or in the
// flattened tensor without a dim. Not differentiable.
Tensor argmax(const Tensor& x, int dim, bool keepdim = false);
Tensor argmin(const Tensor& x, int dim, bool keepdim = false);
Tensor argmax(const Tensor& x);
Tensor argmin(const Tensor& x);

// Variance over `dims` with Bessel's `correction` (1: unbiased, PyTorch's
// default; 0: the population's), and its square root.
Tensor var(const Tensor& x, const Dims& dims = {}, int correction = 1, bool keepdim = false);
Tensor std_dev(const Tensor& x, const Dims& dims = {}, int correction = 1, bool keepdim = false);
// The p-norm over `dims` (p = 2: Euclidean; 1; infinity: the largest magnitude; any p > 0).
Tensor norm(const Tensor& x, double p = 2, const Dims& dims = {}, bool keepdim = false);
// log Σ e^x over `dims`, without overflow.
Tensor logsumexp(const Tensor& x, const Dims& dims, bool keepdim = false);

}  // namespace levers::ops
#endif  // !__CUDACC__
