#include "levers/kernels/op.hpp"

namespace levers::ops {

std::string describe(const Tensor& t) {
    if (!t.defined()) return "missing";
    return fmt::format("{} {} on {}", name_of(t.dtype()), t.shape().str(), t.device().str());
}

TensorArg arg(const Tensor& t) {
    if (!t.defined()) return {};
    LEVERS_CHECK(t.is_contiguous(), "a kernel that reads contiguous memory was given a strided {} tensor (the op must "
                 "make its inputs contiguous first)",
                 t.shape().str());
    return {t.raw(), t.shape(), t.strides(), t.dtype()};
}

void check_defined(const char* op, const char* arg, const Tensor& t) {
    LEVERS_CHECK(t.defined(), "{}: '{}' is missing", op, arg);
}

void check_float(const char* op, const char* arg, const Tensor& t) {
    check_defined(op, arg, t);
    LEVERS_CHECK(t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::bf16,
                 "{}: '{}' is {}, expected f32, f64 or bf16", op, arg, describe(t));
}

void check_dtype(const char* op, const char* arg, const Tensor& t, DType dtype) {
    check_defined(op, arg, t);
    LEVERS_CHECK(t.dtype() == dtype, "{}: '{}' is {}, expected {}", op, arg, describe(t), name_of(dtype));
}

void check_like(const char* op, const char* arg, const Tensor& t, const char* like_arg, const Tensor& like) {
    check_defined(op, arg, t);
    LEVERS_CHECK(t.dtype() == like.dtype() && t.device() == like.device(),
                 "{}: '{}' is {}, but '{}' is {}: both must have one dtype and device", op, arg, describe(t), like_arg,
                 describe(like));
}

void shape_refused(const char* op, const char* arg, const Tensor& t, const std::string& why) {
    LEVERS_FAIL("{}: '{}' is {}, but {}", op, arg, describe(t), why);
}

void check_ndim_at_least(const char* op, const char* arg, const Tensor& t, int n) {
    check_defined(op, arg, t);
    LEVERS_CHECK(t.shape().ndim() >= n, "{}: '{}' is {}, expected at least {} dimension{}", op, arg, describe(t), n,
                 n == 1 ? "" : "s");
}

}  // namespace levers::ops
