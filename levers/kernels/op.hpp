// What every op's glue (levers/kernels/<op>.hpp) shares: argument checks whose
// errors name the op, the argument and both shapes; turning tensors into
// kernel arguments; running a kernel where the tensors live.
#pragma once

#include "levers/core/autograd.hpp"
#include "levers/core/dispatch.hpp"
#include "levers/core/tensor.hpp"

#include <string>

namespace levers::ops {

// "f32 [2, 3] on cpu"
std::string describe(const Tensor& t);

// Inputs most kernels read as contiguous rows: the tensor itself, or a
// contiguous copy (recorded, so gradients flow back through it).
inline Tensor dense(const Tensor& t) { return t.defined() ? t.contiguous() : t; }

// An argument must be there.
void check_defined(const char* op, const char* arg, const Tensor& t);
// A floating-point tensor (f32, f64 or bf16).
void check_float(const char* op, const char* arg, const Tensor& t);
// Of `dtype`.
void check_dtype(const char* op, const char* arg, const Tensor& t, DType dtype);
// Same dtype and device as `like` (the op's first input, named `like_arg`).
void check_like(const char* op, const char* arg, const Tensor& t, const char* like_arg, const Tensor& like);
// Exactly `want`; `why()` says what requires it ("'input' [2, 5] needs [*, 5]"),
// made only when the check fails (steady steps format nothing).
[[noreturn]] void shape_refused(const char* op, const char* arg, const Tensor& t, const std::string& why);
template <class Why> void check_shape(const char* op, const char* arg, const Tensor& t, const Shape& want, Why&& why) {
    if (!(t.shape() == want)) [[unlikely]]
        shape_refused(op, arg, t, why());
}
// At least `n` dimensions.
void check_ndim_at_least(const char* op, const char* arg, const Tensor& t, int n);

// A kernel argument for a kernel that reads contiguous memory: the tensor's
// memory, shape, strides and dtype (empty for an undefined tensor: an
// optional argument left out). A strided tensor here is levers' own bug (the
// op should have made it contiguous): refused, naming the op's call.
TensorArg arg(const Tensor& t);
// The same for kernels that take any strides (the generic ones).
inline TensorArg strided(const Tensor& t) { return {t.raw(), t.shape(), t.strides(), t.dtype()}; }

// Runs the op's kernel (its call type names it) where `like` lives, for `like`'s dtype.
template <class Call> void run(const Tensor& like, Call& call) { run_kernel(like.device(), like.dtype(), call); }
// The same for a kernel of a family that shares one call type, by name.
template <class Call> void run(const KernelSlot& slot, const Tensor& like, Call& call) {
    run_kernel(slot, like.device(), like.dtype(), call);
}

// The float type sums and row statistics are kept in: f32 for f32 and bf16, f64 for f64.
inline DType accumulator(DType t) { return t == DType::f64 ? DType::f64 : DType::f32; }

}  // namespace levers::ops
