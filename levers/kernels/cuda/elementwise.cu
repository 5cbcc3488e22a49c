// The GPU's elementwise kernels (levers/core/generic_calls.hpp,
// ElementwiseCall) but the lists' (elementwise_unary.cu, elementwise_binary.cu):
// where, logical_not, copies between dtypes and fills, through the strided
// kernel (levers/kernels/cuda/strided.cuh). And the helpers that are not ops of
// their own: scaling (gradient averaging, clipping) and f32 <-> bf16
// conversion, 16 bytes per load where the arrays allow.
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/cuda/strided.cuh"
#include "levers/core/generic_calls.hpp"
#include "levers/kernels/grad_clip.hpp"

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
        case DType::u8: return map_strided<Out, std::uint8_t>(s, c.out, CastF<Out>{}, in);
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
