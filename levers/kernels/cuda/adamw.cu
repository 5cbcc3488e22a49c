// AdamW on the GPU in one launch over a whole flat parameter buffer: one
// block per chunk of the chunk table, the CPU's per-element maths, 16-byte
// loads where the arrays allow.
#include "levers/kernels/cuda/register.cuh"
#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/kernels/cuda/device_math.cuh"

#include <cmath>

namespace levers::kernels::cuda {

namespace {

constexpr int kThreads = 256;

// One block per chunk; the chunk's decay flag picks the weight decay. Where
// `packed` (the arrays are aligned16) and the chunk starts on a multiple of
// W, each thread updates W consecutive elements with vector loads.
template <int W, class T, class G>
__global__ void adamw_kernel(T* param, T* m, T* v, const G* grad, const AdamWChunk* chunks, bool packed, T lr,
                             T beta1, T beta2, T eps, T wd, T bc1, T bc2) {
    const AdamWChunk chunk = chunks[blockIdx.x];
    const T decay = chunk.decay ? wd : T(0);
    auto one = [&](std::int64_t i) {
        adamw_element(param[i], m[i], v[i], static_cast<T>(load(grad[i])), lr, beta1, beta2, eps, decay, bc1, bc2);
    };
    if (!packed || chunk.start % W != 0) {
        for (int k = threadIdx.x; k < chunk.count; k += blockDim.x) one(chunk.start + k);
        return;
    }
    for (int k = threadIdx.x * W; k < chunk.count; k += blockDim.x * W) {
        const std::int64_t i = chunk.start + k;
        if (k + W > chunk.count) {  // the chunk's last, partial group
            for (int j = k; j < chunk.count; ++j) one(chunk.start + j);
            continue;
        }
        auto p = load_pack<W>(param + i), mm = load_pack<W>(m + i), vv = load_pack<W>(v + i);
        const auto g = load_pack<W>(grad + i);
        for (int j = 0; j < W; ++j)
            adamw_element(p.v[j], mm.v[j], vv.v[j], static_cast<T>(load(g.v[j])), lr, beta1, beta2, eps, decay, bc1,
                          bc2);
        store_pack(param + i, p);
        store_pack(m + i, mm);
        store_pack(v + i, vv);
    }
}

}  // namespace

template <class T, class G>
void adamw_step(T* param, T* m, T* v, const G* grad, const AdamWChunk* chunks, index_t n_chunks, const AdamWHyper& h,
                long step, cudaStream_t stream) {
    if (n_chunks <= 0) return;
    // The bias corrections in double, as the CPU step computes them, then in T.
    const double bc1 = 1.0 - std::pow(h.beta1, static_cast<double>(step));
    const double bc2 = 1.0 - std::pow(h.beta2, static_cast<double>(step));
    const bool packed = aligned16({param, m, v, grad});
    LEVERS_LAUNCH(adamw_kernel<kPack<T>><<<static_cast<unsigned>(n_chunks), kThreads, 0, stream>>>(
        param, m, v, grad, chunks, packed, T(h.lr), T(h.beta1), T(h.beta2), T(h.eps), T(h.weight_decay), T(bc1),
        T(bc2)));
}

#define LEVERS_ADAMW(T, G)                                                                                        \
    template void adamw_step<T, G>(T*, T*, T*, const G*, const AdamWChunk*, index_t, const AdamWHyper&, long, \
                                   cudaStream_t);
LEVERS_ADAMW(float, float)
LEVERS_ADAMW(float, bf16)
LEVERS_ADAMW(double, double)

namespace {
// By the parameters' dtype; f32 parameters take f32 or bf16 gradients.
template <class T> void adamw_call(const AdamWCall& c) {
    const AdamWHyper& h = c.hyper;
    const auto* chunks = static_cast<const AdamWChunk*>(c.chunks.data);
    const index_t n_chunks = c.chunks.numel() / 4;
    T *p = ptr<T>(c.param), *m = ptr<T>(c.m), *v = ptr<T>(c.v);
    if constexpr (std::is_same_v<T, float>)
        if (c.grad.dtype == DType::bf16)
            return adamw_step(p, m, v, ptr<const bf16>(c.grad), chunks, n_chunks, h, static_cast<long>(c.step),
                              stream_of(c));
    adamw_step(p, m, v, ptr<const T>(c.grad), chunks, n_chunks, h, static_cast<long>(c.step), stream_of(c));
}
LEVERS_KERNEL(AdamWCall, cuda, f32, adamw_call<float>);
LEVERS_KERNEL(AdamWCall, cuda, f64, adamw_call<double>);
}  // namespace

}  // namespace levers::kernels::cuda
