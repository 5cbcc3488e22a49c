// The elementwise ops that are not one line of the lists: checks, the scalar
// forms, where and masked_fill.
#include "levers/kernels/elementwise.hpp"

#include <algorithm>

namespace levers::ops {

namespace detail {

void check_operand(const char* op, const char* arg, const Tensor& t, bool floats) {
    check_defined(op, arg, t);
    if (floats)
        LEVERS_CHECK(is_float(t.dtype()), "{}: '{}' is {}, expected f32, f64 or bf16", op, arg, describe(t));
    else
        LEVERS_CHECK(is_float(t.dtype()) || t.dtype() == DType::i32, "{}: '{}' is {}, expected a float dtype or i32",
                     op, arg, describe(t));
}

void check_scalar(const char* op, const Tensor& t, double value) {
    LEVERS_CHECK(is_float(t.dtype()) || value == std::trunc(value),
                 "{}: the scalar {} is not a whole number, and the tensor is {} (convert it with to(DType::f32) first)",
                 op, value, describe(t));
}

void check_pair(const char* op, const Tensor& a, const Tensor& b) {
    check_defined(op, "b", b);
    LEVERS_CHECK(a.dtype() == b.dtype() && a.device() == b.device(),
                 "{}: 'a' is {} and 'b' is {}: both must have one dtype and device (convert with to() first)", op,
                 describe(a), describe(b));
}

Shape broadcast_pair(const char* op, const Tensor& a, const Tensor& b) {
    LEVERS_CHECK(broadcastable(a.shape(), b.shape()),
                 "{}: 'b' is {}, but 'a' is {}: they do not broadcast (from the last dimension on, each pair of sizes "
                 "must be equal or one of them 1)",
                 op, describe(b), a.shape().str());
    return broadcast_shapes(op, a.shape(), b.shape());
}

void check_in_place(const char* op, const Tensor& x) {
    LEVERS_CHECK(!autograd::grad_enabled() || !x.requires_grad(),
                 "{}_: writes a tensor that records gradients; in-place ops are for code under "
                 "autograd::InferenceMode (optimizer steps, buffers)",
                 op);
}

namespace {
// The bytes a tensor's elements span.
std::pair<const std::byte*, const std::byte*> span(const Tensor& t) {
    const auto* first = static_cast<const std::byte*>(t.raw());
    std::int64_t last = 0;
    for (int d = 0; d < t.ndim(); ++d) last += (t.dim(d) - 1) * t.stride(d);
    return {first, first + (last + 1) * static_cast<std::int64_t>(size_of(t.dtype()))};
}
}  // namespace

Tensor unaliased(const Tensor& x, const Tensor& other) {
    if (x.numel() == 0 || other.numel() == 0) return other;
    const auto [a0, a1] = span(x);
    const auto [b0, b1] = span(other);
    if (a1 <= b0 || b1 <= a0) return other;  // apart
    // The same elements in the same places are read as they are written; anything else is copied first.
    bool same = other.raw() == x.raw() && other.shape() == x.shape();
    for (int d = 0; same && d < x.ndim(); ++d) same = x.stride(d) == other.stride(d);
    return same ? other : other.clone();
}

}  // namespace detail

namespace {
using namespace kernels::ew;

Tensor scalar_op_checked(const char* op, const Tensor& x, double s, bool floats) {
    detail::check_operand(op, "x", x, floats);
    detail::check_scalar(op, x, s);
    return x;
}
}  // namespace

Tensor add(const Tensor& x, double s) {
    scalar_op_checked("add", x, s, false);
    return detail::unary<add_scalar_op>(x, false, s);
}
Tensor sub(const Tensor& x, double s) {
    scalar_op_checked("sub", x, s, false);
    return detail::unary<add_scalar_op>(x, false, -s);
}
Tensor sub(double s, const Tensor& x) {
    scalar_op_checked("sub", x, s, false);
    return detail::unary<rsub_scalar_op>(x, false, s);
}
Tensor mul(const Tensor& x, double s) {
    scalar_op_checked("mul", x, s, false);
    return detail::unary<mul_scalar_op>(x, false, s);
}
Tensor div(const Tensor& x, double s) {
    scalar_op_checked("div", x, s, true);
    return detail::unary<mul_scalar_op>(x, true, 1.0 / s);
}
Tensor div(double s, const Tensor& x) { return detail::unary<rdiv_scalar_op>(x, true, s); }
Tensor pow(const Tensor& x, double exponent) {
    if (exponent == 2) return square(x);
    if (exponent == 1) return mul(x, 1.0);
    return detail::unary<pow_scalar_op>(x, true, exponent);
}
Tensor pow(double base, const Tensor& exponent) {
    LEVERS_CHECK(base > 0, "pow: the base {} must be positive for a tensor exponent", base);
    return detail::unary<rpow_scalar_op>(exponent, true, base);
}
void add_(const Tensor& x, double s) {
    detail::check_scalar("add", x, s);
    detail::unary_<add_scalar_op>(x, false, s);
}
void mul_(const Tensor& x, double s) {
    detail::check_scalar("mul", x, s);
    detail::unary_<mul_scalar_op>(x, false, s);
}

Tensor clamp(const Tensor& x, double lo, double hi) {
    LEVERS_CHECK(!(lo > hi), "clamp: the lower bound {} is above the upper bound {}", lo, hi);
    if (x.dtype() == DType::i32) {
        lo = std::max(lo, -2147483648.0);
        hi = std::min(hi, 2147483647.0);
    }
    return detail::unary<clamp_op>(x, false, lo, hi);
}
Tensor clamp_min(const Tensor& x, double lo) { return clamp(x, lo, std::numeric_limits<double>::infinity()); }
Tensor clamp_max(const Tensor& x, double hi) { return clamp(x, -std::numeric_limits<double>::infinity(), hi); }
void clamp_(const Tensor& x, double lo, double hi) {
    LEVERS_CHECK(!(lo > hi), "clamp: the lower bound {} is above the upper bound {}", lo, hi);
    detail::unary_<clamp_op>(x, false, lo, hi);
}
Tensor leaky_relu(const Tensor& x, double slope) { return detail::unary<leaky_relu_op>(x, true, slope); }
Tensor smooth_l1(const Tensor& x, double beta) {
    LEVERS_CHECK(beta > 0, "smooth_l1: beta must be positive, got {}", beta);
    return detail::unary<smooth_l1_op>(x, true, beta);
}

Tensor logical_not(const Tensor& mask) {
    check_dtype("logical_not", "mask", mask, DType::boolean);
    Tensor out = Tensor::empty(mask.shape(), DType::boolean, mask.device());
    ElementwiseCall call{.out = strided(out), .in = {strided(mask)}};
    run(detail::slot_named("logical_not"), mask, call);
    return out;
}

// --- where --------------------------------------------------------------------------

namespace {
struct WhereSaved {
    autograd::SavedTensor mask;
};
// The gradient of where for input k (1: a, 2: b): the upstream gradient where
// the mask picks that input, zero elsewhere, summed to the input's shape.
void where_backward(autograd::Backward& g, const WhereSaved& s) {
    static const KernelSlot& where = detail::slot_named("where");
    for (int k = 1; k <= 2; ++k) {
        if (!g.needs_grad(k)) continue;
        const Tensor& up = g.grad_out();
        Tensor full = Tensor::empty(up.shape(), up.dtype(), up.device());
        ElementwiseCall call{.out = strided(full), .in = {strided(s.mask), strided(k == 1 ? up : Tensor()),
                                                          strided(k == 2 ? up : Tensor())}};
        run(where, full, call);
        g.set_grad(k, autograd::sum_to(full, g.input_shape(k)));
    }
}

Tensor where_impl(const Tensor& mask, const Tensor* a, double sa, const Tensor* b, double sb) {
    static const KernelSlot& where = detail::slot_named("where");
    check_dtype("where", "mask", mask, DType::boolean);
    const Tensor& like = a ? *a : *b;
    check_defined("where", a ? "a" : "b", like);
    if (a && b) detail::check_pair("where", *a, *b);
    LEVERS_CHECK(like.device() == mask.device(), "where: 'mask' is {} but the values are {}", describe(mask),
                 describe(like));
    Shape shape = broadcast_shapes("where", mask.shape(), like.shape());
    if (a && b) shape = broadcast_shapes("where", shape, b->shape());
    if (!a) detail::check_scalar("where", like, sa);
    if (!b) detail::check_scalar("where", like, sb);
    Tensor out = Tensor::empty(shape, like.dtype(), like.device());
    ElementwiseCall call{.out = strided(out),
                         .in = {strided(mask), a ? strided(*a) : TensorArg{}, b ? strided(*b) : TensorArg{}},
                         .p = {sa, sb}};
    run(where, like, call);
    const Tensor none;
    if (auto* s = autograd::record<WhereSaved>("where", where_backward, {&mask, a ? a : &none, b ? b : &none}, {&out}))
        s->mask = mask;
    return out;
}
}  // namespace

Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b) { return where_impl(mask, &a, 0, &b, 0); }
Tensor where(const Tensor& mask, const Tensor& a, double b) { return where_impl(mask, &a, 0, nullptr, b); }
Tensor where(const Tensor& mask, double a, const Tensor& b) { return where_impl(mask, nullptr, a, &b, 0); }

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
    LEVERS_CHECK(broadcastable(x.shape(), mask.shape()) && broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(),
                 "masked_fill: a {} mask does not broadcast to x's {}", mask.shape().str(), x.shape().str());
    return where(mask, value, x);
}

void masked_fill_(const Tensor& x, const Tensor& mask, double value) {
    static const KernelSlot& where = detail::slot_named("where");
    check_dtype("masked_fill", "mask", mask, DType::boolean);
    detail::check_in_place("masked_fill", x);
    detail::check_scalar("masked_fill", x, value);
    LEVERS_CHECK(broadcastable(x.shape(), mask.shape()) && broadcast_shapes("masked_fill", x.shape(), mask.shape()) == x.shape(),
                 "masked_fill_: a {} mask does not broadcast to x's {}", mask.shape().str(), x.shape().str());
    ElementwiseCall call{.out = strided(x), .in = {strided(mask), TensorArg{}, strided(x)}, .p = {value, 0}};
    run(where, x, call);
}

}  // namespace levers::ops
