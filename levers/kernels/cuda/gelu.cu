// GELU on the GPU (tanh form), the CPU's per-element maths in the accumulator
// type, 16 bytes per load where the arrays allow.
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/kernels/cuda/device_math.cuh"
#include "levers/kernels/gelu.hpp"

namespace levers::kernels::cuda {

namespace {

template <class S> struct Gelu {  // out = gelu(in)
    S* out;
    const S* in;
    template <int W> __device__ void apply(index_t i) const {
        const auto x = load_pack<W>(in + i);
        Pack<S, W> y;
        for (int j = 0; j < W; ++j) y.v[j] = store<S>(gelu_value(load(x.v[j])));
        store_pack(out + i, y);
    }
};

template <class S> struct GeluGrad {  // d_in = d_out · gelu'(in)
    S* d_in;
    const S *d_out, *in;
    template <int W> __device__ void apply(index_t i) const {
        const auto g = load_pack<W>(d_out + i), x = load_pack<W>(in + i);
        Pack<S, W> d;
        for (int j = 0; j < W; ++j) d.v[j] = store<S>(load(g.v[j]) * gelu_grad(load(x.v[j])));
        store_pack(d_in + i, d);
    }
};

}  // namespace

template <class S> void gelu_forward(S* out, const S* in, index_t n, cudaStream_t stream) {
    map<kPack<S>>(Gelu<S>{out, in}, n, aligned16({out, in}), stream);
}

template <class S> void gelu_backward(S* d_in, const S* d_out, const S* in, index_t n, cudaStream_t stream) {
    map<kPack<S>>(GeluGrad<S>{d_in, d_out, in}, n, aligned16({d_in, d_out, in}), stream);
}

#define LEVERS_GELU(S)                                                  \
    template void gelu_forward<S>(S*, const S*, index_t, cudaStream_t); \
    template void gelu_backward<S>(S*, const S*, const S*, index_t, cudaStream_t);
LEVERS_GELU(float)
LEVERS_GELU(double)
LEVERS_GELU(bf16)

namespace {
template <class S> void gelu_kernel_call(const GeluCall& c) {
    gelu_forward(ptr<S>(c.out), ptr<const S>(c.in), c.out.numel(), stream_of(c));
}
template <class S> void gelu_grad_call(const GeluBackwardCall& c) {
    gelu_backward(ptr<S>(c.d_in), ptr<const S>(c.d_out), ptr<const S>(c.in), c.d_in.numel(), stream_of(c));
}
LEVERS_CUDA_KERNELS(GeluCall, gelu_kernel_call);
LEVERS_CUDA_KERNELS(GeluBackwardCall, gelu_grad_call);
}  // namespace

}  // namespace levers::kernels::cuda
