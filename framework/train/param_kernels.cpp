#include "framework/train/param_kernels.hpp"

#include "framework/core/device_memory.hpp"
#include "kernels/grad_clip.hpp"

#if defined(LEVERS_CUDA)
#include "kernels/cuda/ops.hpp"
#endif

namespace levers::train {

namespace {
#if defined(LEVERS_CUDA)
cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }
#else
[[noreturn]] void no_cuda(Device d) { LEVERS_FAIL("{}: this build of levers has no CUDA backend", d.str()); }
#endif
}  // namespace

void scale_grads(ParamSet<float>& params, float s) {
    float* g = params.grads().data<float>();
    if (params.device().is_cpu()) {
        for (std::int64_t i = 0; i < params.size(); ++i) g[i] *= s;
        return;
    }
#if defined(LEVERS_CUDA)
    kernels::cuda::scale(g, s, params.size(), stream());
#else
    no_cuda(params.device());
#endif
}

double clip_grad_norm(ParamSet<float>& params, double max_norm) {
    float* g = params.grads().data<float>();
    if (params.device().is_cpu()) return kernels::cpu::clip_grad_norm(g, params.size(), max_norm);
#if defined(LEVERS_CUDA)
    return kernels::cuda::clip_grad_norm(g, params.size(), max_norm, stream());
#else
    no_cuda(params.device());
#endif
}

template <class T>
void adamw_update(Device device, T* param, T* m, T* v, const T* grad, std::int64_t n, const kernels::AdamWHyper& h,
                  long step) {
    if (device.is_cpu()) return kernels::cpu::adamw_step(param, m, v, grad, n, h, step);
#if defined(LEVERS_CUDA)
    kernels::cuda::adamw_step(param, m, v, grad, n, h, step, stream());
#else
    no_cuda(device);
#endif
}

template void adamw_update<float>(Device, float*, float*, float*, const float*, std::int64_t,
                                  const kernels::AdamWHyper&, long);
template void adamw_update<double>(Device, double*, double*, double*, const double*, std::int64_t,
                                   const kernels::AdamWHyper&, long);

}  // namespace levers::train
