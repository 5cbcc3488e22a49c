#include "framework/train/param_kernels.hpp"

#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "kernels/grad_clip.hpp"

#include <type_traits>

#if defined(LEVERS_CUDA)
#include "kernels/cuda/ops.hpp"
#endif

namespace levers::train {

namespace {
#if defined(LEVERS_CUDA)
namespace cu = kernels::cuda;
cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }
// Calls f with the gradients' pointer in their own type (f32 or bf16).
template <class F> auto with_card_grads(const ParamSet<float>& params, F&& f) {
    void* g = params.grads().raw();
    if (params.grad_dtype() == DType::bf16) return f(static_cast<cu::bf16*>(g));
    return f(static_cast<float*>(g));
}
#else
[[noreturn]] void no_cuda(Device d) { LEVERS_FAIL("{}: this build of levers has no CUDA backend", d.str()); }
#endif
}  // namespace

void scale_grads(ParamSet<float>& params, float s) {
    if (params.device().is_cpu()) {
        float* g = params.grads().data<float>();
        for (std::int64_t i = 0; i < params.size(); ++i) g[i] *= s;
        return;
    }
#if defined(LEVERS_CUDA)
    with_card_grads(params, [&](auto* g) { cu::scale(g, s, params.size(), stream()); });
#else
    no_cuda(params.device());
#endif
}

double clip_grad_norm(ParamSet<float>& params, double max_norm) {
    if (params.device().is_cpu())
        return kernels::cpu::clip_grad_norm(params.grads().data<float>(), params.size(), max_norm);
#if defined(LEVERS_CUDA)
    return with_card_grads(params,
                           [&](auto* g) { return cu::clip_grad_norm(g, params.size(), max_norm, stream()); });
#else
    no_cuda(params.device());
#endif
}

template <class T> std::vector<kernels::AdamWChunk> adamw_chunks(const ParamSet<T>& params) {
    std::vector<kernels::AdamWChunk> out;
    for (const auto& e : params.entries()) kernels::append_adamw_chunks(out, e.offset, e.shape.numel(), e.decay);
    return out;
}

template <class T>
void adamw_update(ParamSet<T>& params, T* m, T* v, const kernels::AdamWHyper& hyper, long step,
                  const kernels::AdamWChunk* card_chunks, std::int64_t n_chunks) {
    T* p = params.params().template data<T>();
    if (params.device().is_cpu()) {
        const T* g = params.grads().template data<T>();
        kernels::AdamWHyper h = hyper;
        for (const auto& e : params.entries()) {
            h.weight_decay = e.decay ? hyper.weight_decay : 0.0;
            kernels::cpu::adamw_step(p + e.offset, m + e.offset, v + e.offset, g + e.offset, e.shape.numel(), h, step);
        }
        return;
    }
#if defined(LEVERS_CUDA)
    void* g = params.grads().raw();
    if constexpr (std::is_same_v<T, float>) {
        if (params.grad_dtype() == DType::bf16)
            return cu::adamw_step(p, m, v, static_cast<const cu::bf16*>(g), card_chunks, n_chunks, hyper, step,
                                  stream());
    }
    cu::adamw_step(p, m, v, static_cast<const T*>(g), card_chunks, n_chunks, hyper, step, stream());
#else
    (void)card_chunks, (void)n_chunks;
    no_cuda(params.device());
#endif
}

template std::vector<kernels::AdamWChunk> adamw_chunks<float>(const ParamSet<float>&);
template std::vector<kernels::AdamWChunk> adamw_chunks<double>(const ParamSet<double>&);
template void adamw_update<float>(ParamSet<float>&, float*, float*, const kernels::AdamWHyper&, long,
                                  const kernels::AdamWChunk*, std::int64_t);
template void adamw_update<double>(ParamSet<double>&, double*, double*, const kernels::AdamWHyper&, long,
                                   const kernels::AdamWChunk*, std::int64_t);

}  // namespace levers::train
