// The maths of every elementwise op, written once for every backend: the
// CPU's strided loops (levers/kernels/cpu/elementwise.cpp) and the GPU's kernel
// (levers/kernels/cuda/elementwise.cu) expand these lists, and levers/kernels/elementwise.hpp
// makes each entry a differentiable op on tensors with broadcasting.
//
// Adding an elementwise op is one line here (its value, and its derivative
// for the backward pass) and one line in the op list (tests/ops/op_cases.cpp).
// In each line, `x` (unary) or `a`, `b` (binary) are the inputs and `y` the
// output, all in T: the accumulator type (float for f32 and bf16, double for
// f64, int for i32); `p0` and `p1` are the op's scalar parameters in T.
// No fmt here: nvcc compiles this file.
#pragma once

#include "levers/kernels/common.hpp"

#include <cmath>

namespace levers::kernels::math {

template <class T> LEVERS_HD T sigmoid(T x) { return T(1) / (T(1) + std::exp(-x)); }
template <class T> LEVERS_HD T sign(T x) { return static_cast<T>((T(0) < x) - (x < T(0))); }
template <class T> LEVERS_HD bool is_nan(T x) { return x != x; }
// NaN wins, as in PyTorch's maximum and minimum.
template <class T> LEVERS_HD T maximum(T a, T b) { return is_nan(a) ? a : is_nan(b) ? b : a > b ? a : b; }
template <class T> LEVERS_HD T minimum(T a, T b) { return is_nan(a) ? a : is_nan(b) ? b : a < b ? a : b; }
// Whether x replaces `best` as the extreme so far (the largest when `largest`, else the smallest): NaN wins,
// the first of equals stays. One expression, no branches, so loops over data full of ties (ReLU's zeros)
// compile to selects rather than mispredicted jumps.
template <class T> LEVERS_HD bool replaces_extreme(T x, T best, bool largest) {
    return !is_nan(best) && (is_nan(x) || (largest ? x > best : x < best));
}
// Where a and b tie, each gets half of the gradient (PyTorch's rule).
template <class T> LEVERS_HD T pick_grad(T a, T b) { return a > b ? T(1) : a == b ? T(0.5) : T(0); }
// x · sigmoid(x) and its derivative.
template <class T> LEVERS_HD T silu_grad(T x) {
    const T s = sigmoid(x);
    return s * (T(1) + x * (T(1) - s));
}
// GELU, exact form: x · Φ(x), Φ the standard normal's distribution function.
template <class T> LEVERS_HD T gelu_erf(T x) { return T(0.5) * x * (T(1) + std::erf(x * T(0.7071067811865476))); }
template <class T> LEVERS_HD T gelu_erf_grad(T x) {
    const T cdf = T(0.5) * (T(1) + std::erf(x * T(0.7071067811865476)));
    return cdf + x * T(0.3989422804014327) * std::exp(T(-0.5) * x * x);
}
template <class T> LEVERS_HD T clamp(T x, T lo, T hi) { return x < lo ? lo : x > hi ? hi : x; }
// d(a^b)/db = a^b · log a, taken as 0 where a = 0 and b >= 0 (where a^b is flat or its limit is).
template <class T> LEVERS_HD T pow_exponent_grad(T a, T b, T y) { return a == T(0) && b >= T(0) ? T(0) : y * std::log(a); }
// The smooth L1 (Huber with delta β = p0) of x and its derivative.
template <class T> LEVERS_HD T smooth_l1(T x, T beta) {
    const T m = x < T(0) ? -x : x;
    return m < beta ? T(0.5) * x * x / beta : m - T(0.5) * beta;
}
template <class T> LEVERS_HD T smooth_l1_grad(T x, T beta) {
    return x <= -beta ? T(-1) : x >= beta ? T(1) : x / beta;
}
// log(1 + e^x) without overflow (softplus), and its derivative sigmoid(x).
template <class T> LEVERS_HD T softplus(T x) { return x > T(0) ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

}  // namespace levers::kernels::math

// Unary ops on floats: X(name, y = f(x), dy/dx). The derivative may use x and
// y; one that uses only one of them reads only that one (ReLU's from y, as
// y > 0 exactly where x > 0: its backward streams two operands, not three).
#define LEVERS_UNARY_FLOAT_OPS(X)                                                           \
    X(exp, std::exp(x), y)                                                                  \
    X(log, std::log(x), T(1) / x)                                                           \
    X(log1p, std::log1p(x), T(1) / (T(1) + x))                                              \
    X(sqrt, std::sqrt(x), T(0.5) / y)                                                       \
    X(rsqrt, T(1) / std::sqrt(x), T(-0.5) * y * y * y)                                      \
    X(reciprocal, T(1) / x, -y * y)                                                         \
    X(sin, std::sin(x), std::cos(x))                                                        \
    X(cos, std::cos(x), -std::sin(x))                                                       \
    X(tanh, std::tanh(x), T(1) - y * y)                                                     \
    X(sigmoid, math::sigmoid(x), y * (T(1) - y))                                            \
    X(silu, x * math::sigmoid(x), math::silu_grad(x))                                       \
    X(softplus, math::softplus(x), math::sigmoid(x))                                        \
    X(gelu_erf, math::gelu_erf(x), math::gelu_erf_grad(x))

// Unary ops on floats and integers (i32): the same form.
#define LEVERS_UNARY_ANY_OPS(X)                                                             \
    X(neg, -x, T(-1))                                                                       \
    X(abs, x < T(0) ? -x : x, math::sign(x))                                                \
    X(sign, math::sign(x), T(0))                                                            \
    X(square, x * x, T(2) * x)                                                              \
    X(relu, x < T(0) ? T(0) : x, y > T(0) ? T(1) : T(0))

// Unary ops with scalar parameters p0, p1 (their functions on tensors are
// written by hand in levers/kernels/elementwise.hpp, naming the parameters).
#define LEVERS_UNARY_PARAM_FLOAT_OPS(X)                                                     \
    X(smooth_l1, math::smooth_l1(x, p0), math::smooth_l1_grad(x, p0))                       \
    X(leaky_relu, x < T(0) ? x * p0 : x, x < T(0) ? p0 : T(1))                              \
    X(rdiv_scalar, p0 / x, -y / x)                                                          \
    X(pow_scalar, std::pow(x, p0), p0 == T(0) ? T(0) : p0 * std::pow(x, p0 - T(1)))        \
    X(rpow_scalar, std::pow(p0, x), y * std::log(p0))
#define LEVERS_UNARY_PARAM_ANY_OPS(X)                                                       \
    X(clamp, math::clamp(x, p0, p1), x >= p0 && x <= p1 ? T(1) : T(0))                      \
    X(add_scalar, x + p0, T(1))                                                             \
    X(mul_scalar, x * p0, p0)                                                               \
    X(rsub_scalar, p0 - x, T(-1))

// Binary ops on floats: X(name, y = f(a, b), dy/da, dy/db).
#define LEVERS_BINARY_FLOAT_OPS(X)                                                          \
    X(div, a / b, T(1) / b, -y / b)                                                         \
    X(pow, std::pow(a, b), b == T(0) ? T(0) : b * std::pow(a, b - T(1)), math::pow_exponent_grad(a, b, y))   \
    X(swiglu, a * math::sigmoid(a) * b, math::silu_grad(a) * b, a * math::sigmoid(a))

// Binary ops on floats and integers.
#define LEVERS_BINARY_ANY_OPS(X)                                                            \
    X(add, a + b, T(1), T(1))                                                               \
    X(sub, a - b, T(1), T(-1))                                                              \
    X(mul, a * b, b, a)                                                                     \
    X(maximum, math::maximum(a, b), math::pick_grad(a, b), math::pick_grad(b, a))           \
    X(minimum, math::minimum(a, b), math::pick_grad(b, a), math::pick_grad(a, b))

// Comparisons (any dtype in, bool out; no gradient): X(name, a OP b).
#define LEVERS_COMPARE_OPS(X) \
    X(eq, a == b)             \
    X(ne, a != b)             \
    X(lt, a < b)              \
    X(le, a <= b)             \
    X(gt, a > b)              \
    X(ge, a >= b)

// Logic on masks (bool in, bool out): X(name, f(a, b)); logical_not is unary.
#define LEVERS_LOGIC_OPS(X)    \
    X(logical_and, a && b)     \
    X(logical_or, a || b)      \
    X(logical_xor, a != b)

// Each entry as a type (exp_op, add_op, ...): its kernel names and its maths,
// for the backends' loops to instantiate.
namespace levers::kernels::ew {

#define LEVERS_EW_UNARY_TYPE(name, value, derivative)                                        \
    struct name##_op {                                                                       \
        static constexpr const char* kName = #name;                                          \
        static constexpr const char* kBackward = #name "_backward";                          \
        template <class T> LEVERS_HD static T f(T x, T p0, T p1) { return value; }           \
        template <class T> LEVERS_HD static T df(T x, T y, T p0, T p1) { return derivative; } \
    };
#define LEVERS_EW_BINARY_TYPE(name, value, d_a, d_b)                                     \
    struct name##_op {                                                                   \
        static constexpr const char* kName = #name;                                      \
        static constexpr const char* kBackward = #name "_backward";                      \
        template <class T> LEVERS_HD static T f(T a, T b) { return value; }              \
        template <class T> LEVERS_HD static T da(T a, T b, T y) { return d_a; }          \
        template <class T> LEVERS_HD static T db(T a, T b, T y) { return d_b; }          \
    };
#define LEVERS_EW_PREDICATE_TYPE(name, value)                               \
    struct name##_op {                                                      \
        static constexpr const char* kName = #name;                         \
        template <class T> LEVERS_HD static bool f(T a, T b) { return value; } \
    };

LEVERS_UNARY_FLOAT_OPS(LEVERS_EW_UNARY_TYPE)
LEVERS_UNARY_ANY_OPS(LEVERS_EW_UNARY_TYPE)
LEVERS_UNARY_PARAM_FLOAT_OPS(LEVERS_EW_UNARY_TYPE)
LEVERS_UNARY_PARAM_ANY_OPS(LEVERS_EW_UNARY_TYPE)
LEVERS_BINARY_FLOAT_OPS(LEVERS_EW_BINARY_TYPE)
LEVERS_BINARY_ANY_OPS(LEVERS_EW_BINARY_TYPE)
LEVERS_COMPARE_OPS(LEVERS_EW_PREDICATE_TYPE)
LEVERS_LOGIC_OPS(LEVERS_EW_PREDICATE_TYPE)

}  // namespace levers::kernels::ew
