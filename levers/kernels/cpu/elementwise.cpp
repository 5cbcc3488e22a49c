// The CPU's elementwise kernels (levers/core/generic_calls.hpp,
// ElementwiseCall): every entry of levers/kernels/elementwise_math.hpp forward and
// backward, comparisons, logic, where, copies between dtypes and fills, all
// through one strided loop (levers/kernels/cpu/strided_loop.hpp) with NumPy
// broadcasting. Runs where every operand steps by 1 (or an input by 0: a
// broadcast value) are plain loops the compiler vectorises.
#include "levers/core/generic_calls.hpp"
#include "levers/kernels/cpu/strided_loop.hpp"
#include "levers/kernels/elementwise_math.hpp"

#include <cstdint>

namespace levers::kernels::cpu {

namespace {

// out[i] = f(a[i]), `a` broadcast to out's shape.
template <class Out, class A, class F> void map1(const TensorArg& out, const TensorArg& a, F f) {
    const StridedLoop<2> l = plan_loop<2>(out.shape, {out.strides, broadcast_strides(a, out.shape)});
    Out* const o = out.as<Out>();
    const A* const x = a.as<const A>();
    const index_t so = l.inner(0), sa = l.inner(1);
    for_each_run(l, [&](const std::array<index_t, 2>& at, index_t n) {
        Out* po = o + at[0];
        const A* pa = x + at[1];
        if (so == 1 && sa == 1) {
#pragma omp simd
            for (index_t i = 0; i < n; ++i) po[i] = f(pa[i]);
        } else {
            for (index_t i = 0; i < n; ++i) po[i * so] = f(pa[i * sa]);
        }
    });
}

// out[i] = f(a[i], b[i]).
template <class Out, class A, class B, class F>
void map2(const TensorArg& out, const TensorArg& a, const TensorArg& b, F f) {
    const StridedLoop<3> l =
        plan_loop<3>(out.shape, {out.strides, broadcast_strides(a, out.shape), broadcast_strides(b, out.shape)});
    Out* const o = out.as<Out>();
    const A* const x = a.as<const A>();
    const B* const y = b.as<const B>();
    const index_t so = l.inner(0), sa = l.inner(1), sb = l.inner(2);
    for_each_run(l, [&](const std::array<index_t, 3>& at, index_t n) {
        Out* po = o + at[0];
        const A* pa = x + at[1];
        const B* pb = y + at[2];
        if (so == 1 && sa == 1 && sb == 1) {
#pragma omp simd
            for (index_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i]);
        } else if (so == 1 && sa == 1 && sb == 0) {
            const B v = *pb;
#pragma omp simd
            for (index_t i = 0; i < n; ++i) po[i] = f(pa[i], v);
        } else if (so == 1 && sa == 0 && sb == 1) {
            const A v = *pa;
#pragma omp simd
            for (index_t i = 0; i < n; ++i) po[i] = f(v, pb[i]);
        } else {
            for (index_t i = 0; i < n; ++i) po[i * so] = f(pa[i * sa], pb[i * sb]);
        }
    });
}

// out[i] = f(a[i], b[i], c[i]).
template <class Out, class A, class B, class C, class F>
void map3(const TensorArg& out, const TensorArg& a, const TensorArg& b, const TensorArg& c, F f) {
    const StridedLoop<4> l = plan_loop<4>(out.shape, {out.strides, broadcast_strides(a, out.shape),
                                                      broadcast_strides(b, out.shape), broadcast_strides(c, out.shape)});
    Out* const o = out.as<Out>();
    const A* const x = a.as<const A>();
    const B* const y = b.as<const B>();
    const C* const z = c.as<const C>();
    const index_t so = l.inner(0), sa = l.inner(1), sb = l.inner(2), sc = l.inner(3);
    for_each_run(l, [&](const std::array<index_t, 4>& at, index_t n) {
        Out* po = o + at[0];
        const A* pa = x + at[1];
        const B* pb = y + at[2];
        const C* pc = z + at[3];
        if (so == 1 && sa == 1 && sb == 1 && sc == 1) {
#pragma omp simd
            for (index_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i], pc[i]);
        } else {
            for (index_t i = 0; i < n; ++i) po[i * so] = f(pa[i * sa], pb[i * sb], pc[i * sc]);
        }
    });
}

// out[i] = f(a[i], b[i], c[i], d[i]).
template <class T, class F>
void map4(const TensorArg& out, const TensorArg& a, const TensorArg& b, const TensorArg& c, const TensorArg& d, F f) {
    const StridedLoop<5> l =
        plan_loop<5>(out.shape, {out.strides, broadcast_strides(a, out.shape), broadcast_strides(b, out.shape),
                                 broadcast_strides(c, out.shape), broadcast_strides(d, out.shape)});
    T* const o = out.as<T>();
    const T *const pa0 = a.as<const T>(), *const pb0 = b.as<const T>(), *const pc0 = c.as<const T>(),
                   *const pd0 = d.as<const T>();
    const index_t so = l.inner(0), sa = l.inner(1), sb = l.inner(2), sc = l.inner(3), sd = l.inner(4);
    for_each_run(l, [&](const std::array<index_t, 5>& at, index_t n) {
        T* po = o + at[0];
        const T *pa = pa0 + at[1], *pb = pb0 + at[2], *pc = pc0 + at[3], *pd = pd0 + at[4];
        if (so == 1 && sa == 1 && sb == 1 && sc == 1 && sd == 1) {
#pragma omp simd
            for (index_t i = 0; i < n; ++i) po[i] = f(pa[i], pb[i], pc[i], pd[i]);
        } else {
            for (index_t i = 0; i < n; ++i) po[i * so] = f(pa[i * sa], pb[i * sb], pc[i * sc], pd[i * sd]);
        }
    });
}

// --- the lists' kernels ---------------------------------------------------------

// Unary: out = f(in[0]); backward: out = in[0] (d_y) · f'(in[1] (x), in[2] (y)).
template <class Op> struct Unary {
    template <class T> static void forward(const ElementwiseCall& c) {
        const T p0 = static_cast<T>(c.p[0]), p1 = static_cast<T>(c.p[1]);
        map1<T, T>(c.out, c.in[0], [=](T x) { return Op::f(x, p0, p1); });
    }
    template <class T> static void backward(const ElementwiseCall& c) {
        const T p0 = static_cast<T>(c.p[0]), p1 = static_cast<T>(c.p[1]);
        map3<T, T, T, T>(c.out, c.in[0], c.in[1], c.in[2], [=](T g, T x, T y) { return g * Op::df(x, y, p0, p1); });
    }
};

// Binary: out = f(in[0], in[1]); backward, at the output's shape: out = in[0]
// (d_y) · ∂f/∂a (which = 0) or ∂f/∂b (which = 1), at in[1] (a), in[2] (b), in[3] (y).
template <class Op> struct Binary {
    template <class T> static void forward(const ElementwiseCall& c) {
        map2<T, T, T>(c.out, c.in[0], c.in[1], [](T a, T b) { return Op::f(a, b); });
    }
    template <class T> static void backward(const ElementwiseCall& c) {
        if (c.which == 0)
            map4<T>(c.out, c.in[0], c.in[1], c.in[2], c.in[3], [](T g, T a, T b, T y) { return g * Op::da(a, b, y); });
        else
            map4<T>(c.out, c.in[0], c.in[1], c.in[2], c.in[3], [](T g, T a, T b, T y) { return g * Op::db(a, b, y); });
    }
};

// Comparisons and logic: a bool out of two inputs of T (the second left out: the scalar p[0]).
template <class Op> struct Predicate {
    template <class T> static void forward(const ElementwiseCall& c) {
        if (!c.in[1].defined()) {
            const T b = static_cast<T>(c.p[0]);
            return map1<bool, T>(c.out, c.in[0], [=](T a) { return Op::f(a, b); });
        }
        map2<bool, T, T>(c.out, c.in[0], c.in[1], [](T a, T b) { return Op::f(a, b); });
    }
};

#define LEVERS_CPU_FLOATS(name, Call, fn)                   \
    LEVERS_KERNEL_NAMED(name, Call, cpu, f32, fn<float>);   \
    LEVERS_KERNEL_NAMED(name, Call, cpu, f64, fn<double>)
#define LEVERS_CPU_NUMBERS(name, Call, fn) \
    LEVERS_CPU_FLOATS(name, Call, fn);     \
    LEVERS_KERNEL_NAMED(name, Call, cpu, i32, fn<std::int32_t>)

#define LEVERS_REGISTER_UNARY_FLOAT(name, value, derivative)                                  \
    LEVERS_CPU_FLOATS(ew::name##_op::kName, ElementwiseCall, Unary<ew::name##_op>::forward); \
    LEVERS_CPU_FLOATS(ew::name##_op::kBackward, ElementwiseCall, Unary<ew::name##_op>::backward);
#define LEVERS_REGISTER_UNARY_ANY(name, value, derivative)                                     \
    LEVERS_CPU_NUMBERS(ew::name##_op::kName, ElementwiseCall, Unary<ew::name##_op>::forward); \
    LEVERS_CPU_FLOATS(ew::name##_op::kBackward, ElementwiseCall, Unary<ew::name##_op>::backward);
#define LEVERS_REGISTER_BINARY_FLOAT(name, value, d_a, d_b)                                     \
    LEVERS_CPU_FLOATS(ew::name##_op::kName, ElementwiseCall, Binary<ew::name##_op>::forward); \
    LEVERS_CPU_FLOATS(ew::name##_op::kBackward, ElementwiseCall, Binary<ew::name##_op>::backward);
#define LEVERS_REGISTER_BINARY_ANY(name, value, d_a, d_b)                                        \
    LEVERS_CPU_NUMBERS(ew::name##_op::kName, ElementwiseCall, Binary<ew::name##_op>::forward); \
    LEVERS_CPU_FLOATS(ew::name##_op::kBackward, ElementwiseCall, Binary<ew::name##_op>::backward);
#define LEVERS_REGISTER_COMPARE(name, value)                                                        \
    LEVERS_CPU_NUMBERS(ew::name##_op::kName, ElementwiseCall, Predicate<ew::name##_op>::forward); \
    LEVERS_KERNEL_NAMED(ew::name##_op::kName, ElementwiseCall, cpu, boolean, Predicate<ew::name##_op>::forward<bool>);
#define LEVERS_REGISTER_LOGIC(name, value) \
    LEVERS_KERNEL_NAMED(ew::name##_op::kName, ElementwiseCall, cpu, boolean, Predicate<ew::name##_op>::forward<bool>);

LEVERS_UNARY_FLOAT_OPS(LEVERS_REGISTER_UNARY_FLOAT)
LEVERS_UNARY_ANY_OPS(LEVERS_REGISTER_UNARY_ANY)
LEVERS_UNARY_PARAM_FLOAT_OPS(LEVERS_REGISTER_UNARY_FLOAT)
LEVERS_UNARY_PARAM_ANY_OPS(LEVERS_REGISTER_UNARY_ANY)
LEVERS_BINARY_FLOAT_OPS(LEVERS_REGISTER_BINARY_FLOAT)
LEVERS_BINARY_ANY_OPS(LEVERS_REGISTER_BINARY_ANY)
LEVERS_COMPARE_OPS(LEVERS_REGISTER_COMPARE)
LEVERS_LOGIC_OPS(LEVERS_REGISTER_LOGIC)

// --- where, logical_not, copies, fills --------------------------------------------

// out = in[0] ? in[1] : in[2], an input left out being the scalar p[0] or p[1].
template <class T> void where(const ElementwiseCall& c) {
    const T p0 = static_cast<T>(c.p[0]), p1 = static_cast<T>(c.p[1]);
    const TensorArg &cond = c.in[0], &a = c.in[1], &b = c.in[2];
    if (a.defined() && b.defined())
        map3<T, bool, T, T>(c.out, cond, a, b, [](bool m, T x, T y) { return m ? x : y; });
    else if (a.defined())
        map2<T, bool, T>(c.out, cond, a, [=](bool m, T x) { return m ? x : p1; });
    else if (b.defined())
        map2<T, bool, T>(c.out, cond, b, [=](bool m, T y) { return m ? p0 : y; });
    else
        map1<T, bool>(c.out, cond, [=](bool m) { return m ? p0 : p1; });
}
LEVERS_KERNEL_NAMED("where", ElementwiseCall, cpu, f32, where<float>);
LEVERS_KERNEL_NAMED("where", ElementwiseCall, cpu, f64, where<double>);
LEVERS_KERNEL_NAMED("where", ElementwiseCall, cpu, i32, where<std::int32_t>);
LEVERS_KERNEL_NAMED("where", ElementwiseCall, cpu, boolean, where<bool>);

void logical_not(const ElementwiseCall& c) { map1<bool, bool>(c.out, c.in[0], [](bool m) { return !m; }); }
LEVERS_KERNEL_NAMED("logical_not", ElementwiseCall, cpu, boolean, logical_not);

// out = in[0] converted to out's dtype (bools become 0 and 1, and anything
// non-zero becomes true), any strides on either side.
template <class Out> struct Copy {
    template <class In> static Out cast(In x) {
        if constexpr (std::is_same_v<Out, bool>)
            return x != In(0);
        else
            return static_cast<Out>(x);
    }
    static void run(const ElementwiseCall& c) {
        switch (c.in[0].dtype) {
            case DType::f32: return map1<Out, float>(c.out, c.in[0], [](float x) { return cast(x); });
            case DType::f64: return map1<Out, double>(c.out, c.in[0], [](double x) { return cast(x); });
            case DType::i32: return map1<Out, std::int32_t>(c.out, c.in[0], [](std::int32_t x) { return cast(x); });
            case DType::boolean: return map1<Out, bool>(c.out, c.in[0], [](bool x) { return cast(x); });
            case DType::u8: return map1<Out, std::uint8_t>(c.out, c.in[0], [](std::uint8_t x) { return cast(x); });
            case DType::bf16:
                return map1<Out, std::uint16_t>(c.out, c.in[0], [](std::uint16_t x) { return cast(bf16_to_float(x)); });
        }
    }
};
// bf16 on the host is storage only: copies into it round to nearest even.
void copy_to_bf16(const ElementwiseCall& c) {
    const TensorArg& in = c.in[0];
    auto store = [](double x) { return float_to_bf16(static_cast<float>(x)); };
    switch (in.dtype) {
        case DType::f32: return map1<std::uint16_t, float>(c.out, in, [=](float x) { return store(x); });
        case DType::f64: return map1<std::uint16_t, double>(c.out, in, [=](double x) { return store(x); });
        case DType::i32: return map1<std::uint16_t, std::int32_t>(c.out, in, [=](std::int32_t x) { return store(x); });
        case DType::boolean: return map1<std::uint16_t, bool>(c.out, in, [=](bool x) { return store(x); });
        case DType::u8: return map1<std::uint16_t, std::uint8_t>(c.out, in, [=](std::uint8_t x) { return store(x); });
        case DType::bf16: return map1<std::uint16_t, std::uint16_t>(c.out, in, [](std::uint16_t x) { return x; });
    }
}
LEVERS_KERNEL_NAMED("copy", ElementwiseCall, cpu, f32, Copy<float>::run);
LEVERS_KERNEL_NAMED("copy", ElementwiseCall, cpu, f64, Copy<double>::run);
LEVERS_KERNEL_NAMED("copy", ElementwiseCall, cpu, i32, Copy<std::int32_t>::run);
LEVERS_KERNEL_NAMED("copy", ElementwiseCall, cpu, boolean, Copy<bool>::run);
LEVERS_KERNEL_NAMED("copy", ElementwiseCall, cpu, bf16, copy_to_bf16);

// out = p[0] everywhere (out may be strided).
template <class T> void fill(const ElementwiseCall& c) {
    const StridedLoop<1> l = plan_loop<1>(c.out.shape, {c.out.strides});
    T* const o = c.out.as<T>();
    const T v = static_cast<T>(c.p[0]);
    const index_t so = l.inner(0);
    for_each_run(l, [&](const std::array<index_t, 1>& at, index_t n) {
        T* po = o + at[0];
        for (index_t i = 0; i < n; ++i) po[i * so] = v;
    });
}
void fill_bf16(const ElementwiseCall& c) {
    ElementwiseCall bits = c;
    bits.p[0] = float_to_bf16(static_cast<float>(c.p[0]));
    fill<std::uint16_t>(bits);
}
LEVERS_KERNEL_NAMED("fill", ElementwiseCall, cpu, f32, fill<float>);
LEVERS_KERNEL_NAMED("fill", ElementwiseCall, cpu, f64, fill<double>);
LEVERS_KERNEL_NAMED("fill", ElementwiseCall, cpu, i32, fill<std::int32_t>);
LEVERS_KERNEL_NAMED("fill", ElementwiseCall, cpu, boolean, fill<bool>);
LEVERS_KERNEL_NAMED("fill", ElementwiseCall, cpu, bf16, fill_bf16);

}  // namespace
}  // namespace levers::kernels::cpu
