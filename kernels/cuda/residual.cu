// The residual add on the card, 16 bytes per load where the arrays allow.
#include "kernels/cuda/register.cuh"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_math.cuh"

namespace levers::kernels::cuda {

namespace {

template <class S> struct Add {  // out = a + b
    S* out;
    const S *a, *b;
    template <int W> __device__ void apply(index_t i) const {
        const auto x = load_pack<W>(a + i), y = load_pack<W>(b + i);
        Pack<S, W> z;
        for (int j = 0; j < W; ++j) z.v[j] = store<S>(load(x.v[j]) + load(y.v[j]));
        store_pack(out + i, z);
    }
};

}  // namespace

template <class S> void residual_forward(S* out, const S* a, const S* b, index_t n, cudaStream_t stream) {
    map<kPack<S>>(Add<S>{out, a, b}, n, aligned16({out, a, b}), stream);
}

template void residual_forward<float>(float*, const float*, const float*, index_t, cudaStream_t);
template void residual_forward<double>(double*, const double*, const double*, index_t, cudaStream_t);
template void residual_forward<bf16>(bf16*, const bf16*, const bf16*, index_t, cudaStream_t);

namespace {
template <class S> void add_call(const KernelCall& c) {
    residual_forward(ptr<S>(c.t[0]), ptr<const S>(c.t[1]), ptr<const S>(c.t[2]), c.t[0].numel(), stream_of(c));
}
LEVERS_CUDA_KERNELS(add, add_call);
}  // namespace

}  // namespace levers::kernels::cuda
