// The card's elementwise kernels (framework/core/generic_calls.hpp,
// ElementwiseCall): every entry of kernels/elementwise_math.hpp forward and
// backward, comparisons, logic, where, copies between dtypes and fills,
// through one strided kernel (kernels/cuda/strided.cuh); binary ops on
// contiguous operands of one shape move 16 bytes per load. And the helpers
// that are not ops of their own: scaling (gradient averaging, clipping) and
// f32 <-> bf16 conversion.
#include "kernels/cuda/register.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/strided.cuh"
#include "framework/core/generic_calls.hpp"
#include "kernels/elementwise_math.hpp"
#include "kernels/grad_clip.hpp"

#include <cstdint>
#include <type_traits>

namespace levers::kernels::cuda {

namespace {

template <class S> struct Scale {  // x *= s
    S* x;
    acc_t<S> s;
    template <int W> __device__ void apply(index_t i) const {
        auto p = load_pack<W>(x + i);
        for (int j = 0; j < W; ++j) p.v[j] = store<S>(load(p.v[j]) * s);
        store_pack(x + i, p);
    }
};

template <class To, class From> struct Convert {  // to = from, rounded where To is narrower
    To* to;
    const From* from;
    template <int W> __device__ void apply(index_t i) const {
        const auto f = load_pack<W>(from + i);
        Pack<To, W> t;
        for (int j = 0; j < W; ++j) t.v[j] = store<To>(static_cast<acc_t<To>>(load(f.v[j])));
        store_pack(to + i, t);
    }
};

}  // namespace

template <class S> void scale(S* x, acc_t<S> s, index_t n, cudaStream_t stream) {
    map<kPack<S>>(Scale<S>{x, s}, n, aligned16({x}), stream);
}

// Packs as wide as the wider type allows in 16 bytes (4 elements for f32 and bf16).
template <class To, class From> void convert(To* to, const From* from, index_t n, cudaStream_t stream) {
    constexpr int kWidth = kPack<To> < kPack<From> ? kPack<To> : kPack<From>;
    map<kWidth>(Convert<To, From>{to, from}, n, aligned16({to, from}), stream);
}

template void scale<float>(float*, float, index_t, cudaStream_t);
template void scale<double>(double*, double, index_t, cudaStream_t);
template void scale<bf16>(bf16*, float, index_t, cudaStream_t);
template void convert<bf16, float>(bf16*, const float*, index_t, cudaStream_t);
template void convert<float, bf16>(float*, const bf16*, index_t, cudaStream_t);

namespace {

template <class S> void scale_call(const ScaleCall& c) {
    scale(ptr<S>(c.x), static_cast<acc_t<S>>(c.factor), c.x.numel(), stream_of(c));
}
LEVERS_CUDA_KERNELS(ScaleCall, scale_call);

// --- the lists ------------------------------------------------------------------

template <class Op, class C> struct UnaryF {
    double p0, p1;
    __device__ C operator()(C x) const { return Op::template f<C>(x, static_cast<C>(p0), static_cast<C>(p1)); }
};
template <class Op, class C> struct UnaryGradF {
    double p0, p1;
    __device__ C operator()(C g, C x, C y) const {
        return g * Op::template df<C>(x, y, static_cast<C>(p0), static_cast<C>(p1));
    }
};
template <class Op, class C> struct BinaryF {
    __device__ C operator()(C a, C b) const { return Op::template f<C>(a, b); }
};
template <class Op, class C> struct BinaryGradF {
    bool wrt_b;
    __device__ C operator()(C g, C a, C b, C y) const {
        return g * (wrt_b ? Op::template db<C>(a, b, y) : Op::template da<C>(a, b, y));
    }
};
template <class Op, class C> struct PredicateF {
    __device__ bool operator()(C a, C b) const { return Op::template f<C>(a, b); }
};
template <class Op, class C> struct PredicateScalarF {
    double b;
    __device__ bool operator()(C a) const { return Op::template f<C>(a, static_cast<C>(b)); }
};

// out = f(a, b) over 16-byte packs, for contiguous operands of one shape.
template <class Op, class S> struct BinaryPacked {
    S* out;
    const S *a, *b;
    template <int W> __device__ void apply(index_t i) const {
        const auto x = load_pack<W>(a + i), y = load_pack<W>(b + i);
        Pack<S, W> z;
        for (int j = 0; j < W; ++j) z.v[j] = store<S>(Op::template f<acc_t<S>>(load(x.v[j]), load(y.v[j])));
        store_pack(out + i, z);
    }
};

template <class Op> struct Unary {
    template <class S> static void forward(const ElementwiseCall& c) {
        map_strided<S, S>(stream_of(c), c.out, UnaryF<Op, acc_t<S>>{c.p[0], c.p[1]}, c.in[0]);
    }
    template <class S> static void backward(const ElementwiseCall& c) {
        map_strided<S, S, S, S>(stream_of(c), c.out, UnaryGradF<Op, acc_t<S>>{c.p[0], c.p[1]}, c.in[0], c.in[1],
                                c.in[2]);
    }
};
template <class Op> struct Binary {
    template <class S> static void forward(const ElementwiseCall& c) {
        const TensorArg &out = c.out, &a = c.in[0], &b = c.in[1];
        if (a.shape == out.shape && b.shape == out.shape && out.contiguous() && a.contiguous() && b.contiguous()) {
            if constexpr (!std::is_same_v<S, bool>)
                return map<kPack<S>>(BinaryPacked<Op, S>{ptr<S>(out), ptr<const S>(a), ptr<const S>(b)}, out.numel(),
                                     aligned16({out.data, a.data, b.data}), stream_of(c));
        }
        map_strided<S, S, S>(stream_of(c), out, BinaryF<Op, acc_t<S>>{}, a, b);
    }
    template <class S> static void backward(const ElementwiseCall& c) {
        map_strided<S, S, S, S, S>(stream_of(c), c.out, BinaryGradF<Op, acc_t<S>>{c.which == 1}, c.in[0], c.in[1],
                                   c.in[2], c.in[3]);
    }
};
template <class Op> struct Predicate {
    template <class S> static void forward(const ElementwiseCall& c) {
        if (!c.in[1].defined())
            return map_strided<bool, S>(stream_of(c), c.out, PredicateScalarF<Op, acc_t<S>>{c.p[0]}, c.in[0]);
        map_strided<bool, S, S>(stream_of(c), c.out, PredicateF<Op, acc_t<S>>{}, c.in[0], c.in[1]);
    }
};

#define LEVERS_CUDA_NUMBERS(name, Call, fn) \
    LEVERS_CUDA_KERNELS_NAMED(name, Call, fn); \
    LEVERS_KERNEL_NAMED(name, Call, cuda, i32, fn<std::int32_t>)

#define LEVERS_CUDA_UNARY_FLOAT(name, value, derivative)                                          \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kName, ElementwiseCall, Unary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Unary<ew::name##_op>::backward);
#define LEVERS_CUDA_UNARY_ANY(name, value, derivative)                                        \
    LEVERS_CUDA_NUMBERS(ew::name##_op::kName, ElementwiseCall, Unary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Unary<ew::name##_op>::backward);
#define LEVERS_CUDA_BINARY_FLOAT(name, value, d_a, d_b)                                            \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kName, ElementwiseCall, Binary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Binary<ew::name##_op>::backward);
#define LEVERS_CUDA_BINARY_ANY(name, value, d_a, d_b)                                          \
    LEVERS_CUDA_NUMBERS(ew::name##_op::kName, ElementwiseCall, Binary<ew::name##_op>::forward); \
    LEVERS_CUDA_KERNELS_NAMED(ew::name##_op::kBackward, ElementwiseCall, Binary<ew::name##_op>::backward);
#define LEVERS_CUDA_COMPARE(name, value)                                                          \
    LEVERS_CUDA_NUMBERS(ew::name##_op::kName, ElementwiseCall, Predicate<ew::name##_op>::forward); \
    LEVERS_KERNEL_NAMED(ew::name##_op::kName, ElementwiseCall, cuda, boolean, Predicate<ew::name##_op>::forward<bool>);
#define LEVERS_CUDA_LOGIC(name, value) \
    LEVERS_KERNEL_NAMED(ew::name##_op::kName, ElementwiseCall, cuda, boolean, Predicate<ew::name##_op>::forward<bool>);

LEVERS_UNARY_FLOAT_OPS(LEVERS_CUDA_UNARY_FLOAT)
LEVERS_UNARY_ANY_OPS(LEVERS_CUDA_UNARY_ANY)
LEVERS_UNARY_PARAM_FLOAT_OPS(LEVERS_CUDA_UNARY_FLOAT)
LEVERS_UNARY_PARAM_ANY_OPS(LEVERS_CUDA_UNARY_ANY)
LEVERS_BINARY_FLOAT_OPS(LEVERS_CUDA_BINARY_FLOAT)
LEVERS_BINARY_ANY_OPS(LEVERS_CUDA_BINARY_ANY)
LEVERS_COMPARE_OPS(LEVERS_CUDA_COMPARE)
LEVERS_LOGIC_OPS(LEVERS_CUDA_LOGIC)

// --- where, logical_not, copies, fills ------------------------------------------------

template <class C> struct WhereF {
    __device__ C operator()(bool m, C a, C b) const { return m ? a : b; }
};
template <class C> struct WhereScalarB {  // the b side a scalar
    double b;
    __device__ C operator()(bool m, C a) const { return m ? a : static_cast<C>(b); }
};
template <class C> struct WhereScalarA {  // the a side a scalar
    double a;
    __device__ C operator()(bool m, C b) const { return m ? static_cast<C>(a) : b; }
};
template <class C> struct WhereScalars {
    double a, b;
    __device__ C operator()(bool m) const { return static_cast<C>(m ? a : b); }
};
template <class S> void where_call(const ElementwiseCall& c) {
    using C = acc_t<S>;
    const TensorArg &mask = c.in[0], &a = c.in[1], &b = c.in[2];
    const cudaStream_t s = stream_of(c);
    if (a.defined() && b.defined()) return map_strided<S, bool, S, S>(s, c.out, WhereF<C>{}, mask, a, b);
    if (a.defined()) return map_strided<S, bool, S>(s, c.out, WhereScalarB<C>{c.p[1]}, mask, a);
    if (b.defined()) return map_strided<S, bool, S>(s, c.out, WhereScalarA<C>{c.p[0]}, mask, b);
    map_strided<S, bool>(s, c.out, WhereScalars<C>{c.p[0], c.p[1]}, mask);
}
LEVERS_CUDA_NUMBERS("where", ElementwiseCall, where_call);
LEVERS_KERNEL_NAMED("where", ElementwiseCall, cuda, boolean, where_call<bool>);

struct NotF {
    __device__ bool operator()(bool m) const { return !m; }
};
void logical_not_call(const ElementwiseCall& c) { map_strided<bool, bool>(stream_of(c), c.out, NotF{}, c.in[0]); }
LEVERS_KERNEL_NAMED("logical_not", ElementwiseCall, cuda, boolean, logical_not_call);

// A value of one compute type as another's (anything non-zero is true).
template <class To> struct CastF {
    template <class C> __device__ acc_t<To> operator()(C x) const {
        if constexpr (std::is_same_v<To, bool>)
            return x != C(0);
        else
            return static_cast<acc_t<To>>(x);
    }
};
template <class Out> void copy_call(const ElementwiseCall& c) {
    const TensorArg& in = c.in[0];
    const cudaStream_t s = stream_of(c);
    const bool packed = in.shape == c.out.shape && in.contiguous() && c.out.contiguous();
    if constexpr (std::is_same_v<Out, bf16>)
        if (packed && in.dtype == DType::f32) return convert(ptr<bf16>(c.out), ptr<const float>(in), in.numel(), s);
    if constexpr (std::is_same_v<Out, float>)
        if (packed && in.dtype == DType::bf16) return convert(ptr<float>(c.out), ptr<const bf16>(in), in.numel(), s);
    switch (in.dtype) {
        case DType::f32: return map_strided<Out, float>(s, c.out, CastF<Out>{}, in);
        case DType::f64: return map_strided<Out, double>(s, c.out, CastF<Out>{}, in);
        case DType::bf16: return map_strided<Out, bf16>(s, c.out, CastF<Out>{}, in);
        case DType::i32: return map_strided<Out, std::int32_t>(s, c.out, CastF<Out>{}, in);
        case DType::boolean: return map_strided<Out, bool>(s, c.out, CastF<Out>{}, in);
    }
}
LEVERS_CUDA_NUMBERS("copy", ElementwiseCall, copy_call);
LEVERS_KERNEL_NAMED("copy", ElementwiseCall, cuda, boolean, copy_call<bool>);

template <class C> struct FillF {
    double value;
    __device__ C operator()() const { return static_cast<C>(value); }
};
template <class S> void fill_call(const ElementwiseCall& c) {
    map_strided<S>(stream_of(c), c.out, FillF<acc_t<S>>{c.p[0]});
}
LEVERS_CUDA_NUMBERS("fill", ElementwiseCall, fill_call);
LEVERS_KERNEL_NAMED("fill", ElementwiseCall, cuda, boolean, fill_call<bool>);

}  // namespace

}  // namespace levers::kernels::cuda
