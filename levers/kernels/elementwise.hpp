// Elementwise ops on tensors with NumPy broadcasting, differentiable: every
// entry of levers/kernels/elementwise_math.hpp as a function (ops::exp(x),
// ops::mul(a, b), ...), the scalar forms, comparisons giving bool masks,
// where and masked_fill, clamp, and the C++ operators (x * 0.5, a + b, -x,
// a < b). Inputs may have any strides; the output is a new contiguous tensor
// of the broadcast shape. A binary op's gradient is summed back to each
// input's own shape. Tensor-tensor ops need one dtype and device on both
// sides (convert with to(dtype) first); a scalar takes the tensor's dtype.
//
// The in-place forms (add_(x, y), exp_(x), ...) write x itself, for code
// under InferenceMode (optimizers, buffers): they refuse a tensor that
// records gradients while grad mode is on.
#pragma once

#include "levers/core/generic_calls.hpp"
#include "levers/kernels/elementwise_math.hpp"

#if !defined(__CUDACC__)
#include "levers/kernels/op.hpp"

#include <cmath>
#include <limits>
#include <type_traits>

namespace levers::ops {

namespace detail {

template <class Op> const KernelSlot& forward_slot() {
    static const KernelSlot& slot = kernel_slot_of<ElementwiseCall>(Op::kName);
    return slot;
}
template <class Op> const KernelSlot& backward_slot() {
    static const KernelSlot& slot = kernel_slot_of<ElementwiseCall>(Op::kBackward);
    return slot;
}
inline const KernelSlot& slot_named(const char* name) { return kernel_slot_of<ElementwiseCall>(name); }

// The checks every elementwise op makes: floats only for `floats` ops, a
// scalar an integer tensor can hold.
void check_operand(const char* op, const char* arg, const Tensor& t, bool floats);
void check_scalar(const char* op, const Tensor& t, double value);
void check_pair(const char* op, const Tensor& a, const Tensor& b);
// The shape a and b broadcast to; a levers::Error naming the op, both arguments and their shapes where they do not.
Shape broadcast_pair(const char* op, const Tensor& a, const Tensor& b);
// In-place forms: `x` must not record gradients now, and `other` (broadcast
// to x's shape) is copied first where it overlaps x's memory otherwise.
void check_in_place(const char* op, const Tensor& x);
Tensor unaliased(const Tensor& x, const Tensor& other);

struct UnarySaved {
    autograd::SavedTensor x, y;
    double p0 = 0, p1 = 0;
};
template <class Op> void unary_backward(autograd::Backward& g, const UnarySaved& s) {
    const Tensor dx = g.write_grad(0);
    ElementwiseCall call{.out = strided(dx), .in = {strided(g.grad_out()), strided(s.x), strided(s.y)}, .p = {s.p0, s.p1}};
    run(backward_slot<Op>(), dx, call);
}

// y = f(x) with parameters p0, p1.
template <class Op> Tensor unary(const Tensor& x, bool floats, double p0 = 0, double p1 = 0) {
    check_operand(Op::kName, "x", x, floats);
    Tensor y = Tensor::empty(x.shape(), x.dtype(), x.device());
    ElementwiseCall call{.out = strided(y), .in = {strided(x)}, .p = {p0, p1}};
    run(forward_slot<Op>(), x, call);
    if (auto* s = autograd::record<UnarySaved>(Op::kName, unary_backward<Op>, {&x}, {&y})) *s = {x, y, p0, p1};
    return y;
}
template <class Op> void unary_(const Tensor& x, bool floats, double p0 = 0, double p1 = 0) {
    check_operand(Op::kName, "x", x, floats);
    check_in_place(Op::kName, x);
    ElementwiseCall call{.out = strided(x), .in = {strided(x)}, .p = {p0, p1}};
    run(forward_slot<Op>(), x, call);
}

struct BinarySaved {
    autograd::SavedTensor a, b, y;
};
// Sums and differences need no saved tensor: their gradients are the upstream one, summed where broadcast.
template <class Op>
constexpr bool kLinear = std::is_same_v<Op, kernels::ew::add_op> || std::is_same_v<Op, kernels::ew::sub_op>;
template <class Op> void binary_backward(autograd::Backward& g, const BinarySaved& s) {
    for (int k = 0; k < 2; ++k) {
        if (!g.needs_grad(k)) continue;
        if constexpr (kLinear<Op>) {
            const Tensor summed = autograd::sum_to(g.grad_out(), g.input_shape(k));
            if (k == 1 && std::is_same_v<Op, kernels::ew::sub_op>)
                g.set_grad(k, unary<kernels::ew::neg_op>(summed, false));
            else
                g.pass_grad(k, summed);
            continue;
        }
        Tensor full = Tensor::empty(g.grad_out().shape(), g.grad_out().dtype(), g.grad_out().device());
        ElementwiseCall call{.out = strided(full),
                             .in = {strided(g.grad_out()), strided(s.a), strided(s.b), strided(s.y)},
                             .which = k};
        run(backward_slot<Op>(), full, call);
        g.set_grad(k, autograd::sum_to(full, g.input_shape(k)));
    }
}

// y = f(a, b), broadcast.
template <class Op> Tensor binary(const Tensor& a, const Tensor& b, bool floats) {
    check_operand(Op::kName, "a", a, floats);
    check_pair(Op::kName, a, b);
    Tensor y = Tensor::empty(broadcast_pair(Op::kName, a, b), a.dtype(), a.device());
    ElementwiseCall call{.out = strided(y), .in = {strided(a), strided(b)}};
    run(forward_slot<Op>(), a, call);
    if (auto* s = autograd::record<BinarySaved>(Op::kName, binary_backward<Op>, {&a, &b}, {&y}))
        if constexpr (!kLinear<Op>) *s = {a, b, y};
    return y;
}
template <class Op> void binary_(const Tensor& x, const Tensor& other, bool floats) {
    check_operand(Op::kName, "x", x, floats);
    check_pair(Op::kName, x, other);
    check_in_place(Op::kName, x);
    LEVERS_CHECK(broadcastable(x.shape(), other.shape()) && broadcast_shapes(Op::kName, x.shape(), other.shape()) == x.shape(),
                 "{}_: a {} operand does not broadcast to the written tensor's {}", Op::kName, other.shape().str(),
                 x.shape().str());
    const Tensor b = unaliased(x, other);
    ElementwiseCall call{.out = strided(x), .in = {strided(x), strided(b)}};
    run(forward_slot<Op>(), x, call);
}

// A bool mask: f(a, b), or f(a, scalar) where b is left out.
template <class Op> Tensor predicate(const Tensor& a, const Tensor* b, double scalar) {
    check_defined(Op::kName, "a", a);
    Shape shape = a.shape();
    ElementwiseCall call{.in = {strided(a)}, .p = {scalar, 0}};
    if (b) {
        check_pair(Op::kName, a, *b);
        shape = broadcast_pair(Op::kName, a, *b);
        call.in[1] = strided(*b);
    }
    Tensor mask = Tensor::empty(shape, DType::boolean, a.device());
    call.out = strided(mask);
    run(forward_slot<Op>(), a, call);
    return mask;
}

}  // namespace detail

// --- the lists, as functions ---------------------------------------------------------

#define LEVERS_OP_UNARY_FLOAT(name, value, derivative) \
    inline Tensor name(const Tensor& x) { return detail::unary<kernels::ew::name##_op>(x, true); } \
    inline void name##_(const Tensor& x) { detail::unary_<kernels::ew::name##_op>(x, true); }
#define LEVERS_OP_UNARY_ANY(name, value, derivative) \
    inline Tensor name(const Tensor& x) { return detail::unary<kernels::ew::name##_op>(x, false); } \
    inline void name##_(const Tensor& x) { detail::unary_<kernels::ew::name##_op>(x, false); }
#define LEVERS_OP_BINARY_FLOAT(name, value, d_a, d_b) \
    inline Tensor name(const Tensor& a, const Tensor& b) { return detail::binary<kernels::ew::name##_op>(a, b, true); } \
    inline void name##_(const Tensor& x, const Tensor& other) { detail::binary_<kernels::ew::name##_op>(x, other, true); }
#define LEVERS_OP_BINARY_ANY(name, value, d_a, d_b) \
    inline Tensor name(const Tensor& a, const Tensor& b) { return detail::binary<kernels::ew::name##_op>(a, b, false); } \
    inline void name##_(const Tensor& x, const Tensor& other) { detail::binary_<kernels::ew::name##_op>(x, other, false); }
#define LEVERS_OP_PREDICATE(name, value)                                                                            \
    inline Tensor name(const Tensor& a, const Tensor& b) { return detail::predicate<kernels::ew::name##_op>(a, &b, 0); } \
    inline Tensor name(const Tensor& a, double b) { return detail::predicate<kernels::ew::name##_op>(a, nullptr, b); }

// exp, log, log1p, sqrt, rsqrt, reciprocal, sin, cos, tanh, sigmoid, silu, softplus, gelu_erf (floats)
LEVERS_UNARY_FLOAT_OPS(LEVERS_OP_UNARY_FLOAT)
// neg, abs, sign, square, relu (floats and i32)
LEVERS_UNARY_ANY_OPS(LEVERS_OP_UNARY_ANY)
// div, pow (floats)
LEVERS_BINARY_FLOAT_OPS(LEVERS_OP_BINARY_FLOAT)
// add, sub, mul, maximum, minimum (floats and i32)
LEVERS_BINARY_ANY_OPS(LEVERS_OP_BINARY_ANY)
// eq, ne, lt, le, gt, ge: a bool mask (any dtype; against a tensor or a scalar)
LEVERS_COMPARE_OPS(LEVERS_OP_PREDICATE)
// logical_and, logical_or, logical_xor (bool masks)
LEVERS_LOGIC_OPS(LEVERS_OP_PREDICATE)

#undef LEVERS_OP_UNARY_FLOAT
#undef LEVERS_OP_UNARY_ANY
#undef LEVERS_OP_BINARY_FLOAT
#undef LEVERS_OP_BINARY_ANY
#undef LEVERS_OP_PREDICATE

// --- with scalars ---------------------------------------------------------------------

// x + s, x - s, s - x, x · s, x / s, s / x, x^s, s^x; differentiable in x.
Tensor add(const Tensor& x, double s);
Tensor sub(const Tensor& x, double s);
Tensor sub(double s, const Tensor& x);
Tensor mul(const Tensor& x, double s);
Tensor div(const Tensor& x, double s);
Tensor div(double s, const Tensor& x);
Tensor pow(const Tensor& x, double exponent);
Tensor pow(double base, const Tensor& exponent);
void add_(const Tensor& x, double s);
void mul_(const Tensor& x, double s);
// max(lo, min(x, hi)) (the gradient passes where lo <= x <= hi); one-sided forms.
Tensor clamp(const Tensor& x, double lo, double hi);
Tensor clamp_min(const Tensor& x, double lo);
Tensor clamp_max(const Tensor& x, double hi);
void clamp_(const Tensor& x, double lo, double hi);
// x for x >= 0, slope · x below.
Tensor leaky_relu(const Tensor& x, double slope = 0.01);
// ½x²/β for |x| < β, |x| - ½β beyond (Huber's loss of x, per element).
Tensor smooth_l1(const Tensor& x, double beta = 1.0);
// !mask, elementwise (bool).
Tensor logical_not(const Tensor& mask);

// GELU in its exact form (erf, PyTorch's default) or the tanh form (GPT-2's; ops::gelu(x) alone).
enum class GeluForm { tanh, erf };

// --- selecting ------------------------------------------------------------------------

// mask ? a : b elementwise, all three broadcast together (mask bool; a and b
// one dtype); either side may be a scalar. Differentiable in a and b.
Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& mask, const Tensor& a, double b);
Tensor where(const Tensor& mask, double a, const Tensor& b);
// x with `value` where mask is true (mask broadcast to x's shape); differentiable in x.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);
void masked_fill_(const Tensor& x, const Tensor& mask, double value);

}  // namespace levers::ops

// --- operators ---------------------------------------------------------------------

namespace levers {
inline Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
inline Tensor operator+(const Tensor& x, double s) { return ops::add(x, s); }
inline Tensor operator+(double s, const Tensor& x) { return ops::add(x, s); }
inline Tensor operator-(const Tensor& x, double s) { return ops::sub(x, s); }
inline Tensor operator-(double s, const Tensor& x) { return ops::sub(s, x); }
inline Tensor operator*(const Tensor& x, double s) { return ops::mul(x, s); }
inline Tensor operator*(double s, const Tensor& x) { return ops::mul(x, s); }
inline Tensor operator/(const Tensor& x, double s) { return ops::div(x, s); }
inline Tensor operator/(double s, const Tensor& x) { return ops::div(s, x); }
inline Tensor operator-(const Tensor& x) { return ops::neg(x); }
inline Tensor operator==(const Tensor& a, const Tensor& b) { return ops::eq(a, b); }
inline Tensor operator!=(const Tensor& a, const Tensor& b) { return ops::ne(a, b); }
inline Tensor operator<(const Tensor& a, const Tensor& b) { return ops::lt(a, b); }
inline Tensor operator<=(const Tensor& a, const Tensor& b) { return ops::le(a, b); }
inline Tensor operator>(const Tensor& a, const Tensor& b) { return ops::gt(a, b); }
inline Tensor operator>=(const Tensor& a, const Tensor& b) { return ops::ge(a, b); }
inline Tensor operator==(const Tensor& a, double b) { return ops::eq(a, b); }
inline Tensor operator!=(const Tensor& a, double b) { return ops::ne(a, b); }
inline Tensor operator<(const Tensor& a, double b) { return ops::lt(a, b); }
inline Tensor operator<=(const Tensor& a, double b) { return ops::le(a, b); }
inline Tensor operator>(const Tensor& a, double b) { return ops::gt(a, b); }
inline Tensor operator>=(const Tensor& a, double b) { return ops::ge(a, b); }
// Masks combine as PyTorch's bool tensors do.
inline Tensor operator&(const Tensor& a, const Tensor& b) { return ops::logical_and(a, b); }
inline Tensor operator|(const Tensor& a, const Tensor& b) { return ops::logical_or(a, b); }
inline Tensor operator^(const Tensor& a, const Tensor& b) { return ops::logical_xor(a, b); }
inline Tensor operator~(const Tensor& mask) { return ops::logical_not(mask); }
// In place (under InferenceMode): x += y, x *= 0.9, ...
inline Tensor& operator+=(Tensor& x, const Tensor& y) { ops::add_(x, y); return x; }
inline Tensor& operator-=(Tensor& x, const Tensor& y) { ops::sub_(x, y); return x; }
inline Tensor& operator*=(Tensor& x, const Tensor& y) { ops::mul_(x, y); return x; }
inline Tensor& operator/=(Tensor& x, const Tensor& y) { ops::div_(x, y); return x; }
inline Tensor& operator+=(Tensor& x, double s) { ops::add_(x, s); return x; }
inline Tensor& operator-=(Tensor& x, double s) { ops::add_(x, -s); return x; }
inline Tensor& operator*=(Tensor& x, double s) { ops::mul_(x, s); return x; }
inline Tensor& operator/=(Tensor& x, double s) { ops::mul_(x, 1.0 / s); return x; }
}  // namespace levers

#endif  // !__CUDACC__
