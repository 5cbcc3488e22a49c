// Element-wise helpers that are not ops of their own: scaling (gradient
// averaging over micro-batches, clipping) and storage conversions (bf16
// copies of f32 weights), 16 bytes per load where the arrays allow.
#include "kernels/cuda/register.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

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
template <class S> void scale_call(const KernelCall& c) {
    scale(ptr<S>(c.t[0]), static_cast<acc_t<S>>(c.f[0]), c.t[0].numel(), stream_of(c));
}
LEVERS_CUDA_KERNELS(scale, scale_call);
// "convert" by the output's dtype: t0 out, t1 in (f32 <-> bf16).
template <class To> void convert_call(const KernelCall& c) {
    if constexpr (std::is_same_v<To, bf16>) {
        if (c.t[1].dtype == DType::f32)
            return convert(ptr<bf16>(c.t[0]), ptr<const float>(c.t[1]), c.t[0].numel(), stream_of(c));
    } else if constexpr (std::is_same_v<To, float>) {
        if (c.t[1].dtype == DType::bf16)
            return convert(ptr<float>(c.t[0]), ptr<const bf16>(c.t[1]), c.t[0].numel(), stream_of(c));
    }
    detail::op_refused("convert: the card converts f32 and bf16 into each other only", __FILE__, __LINE__);
}
LEVERS_KERNEL(convert, cuda, bf16, convert_call<bf16>);
LEVERS_KERNEL(convert, cuda, f32, convert_call<float>);
}  // namespace

}  // namespace levers::kernels::cuda
