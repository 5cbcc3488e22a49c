#include "framework/train/optimizer.hpp"

#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "framework/train/param_kernels.hpp"

namespace levers::train {

template <class T>
AdamW<T>::AdamW(ParamSet<T>& params, const kernels::AdamWHyper& hyper)
    : params_(params),
      hyper_(hyper),
      m_(Tensor::zeros({params.size()}, dtype_of<T>(), params.device())),
      v_(Tensor::zeros({params.size()}, dtype_of<T>(), params.device())) {
    if (params.device().is_cpu()) return;
    const auto chunks = adamw_chunks(params);
    const std::size_t bytes = chunks.size() * sizeof(kernels::AdamWChunk);
    card_chunks_ = device_alloc(bytes);
    device_copy(card_chunks_.get(), chunks.data(), bytes);
    n_chunks_ = static_cast<std::int64_t>(chunks.size());
}

template <class T> void AdamW<T>::step(double lr) {
    ++step_;
    kernels::AdamWHyper h = hyper_;
    h.lr = lr;
    adamw_update(params_, m_.data<T>(), v_.data<T>(), h, step_,
                 reinterpret_cast<const kernels::AdamWChunk*>(card_chunks_.get()), n_chunks_);
}

template <class T> void AdamW<T>::load(const Tensor& m, const Tensor& v, long steps) {
    LEVERS_CHECK(m.shape() == m_.shape() && v.shape() == v_.shape() && m.dtype() == m_.dtype() &&
                     v.dtype() == v_.dtype(),
                 "AdamW moments of shape {} do not fit {} parameters", m.shape().str(), params_.size());
    LEVERS_CHECK(steps >= 0, "AdamW step count must be >= 0, got {}", steps);
    m_.copy_from(m);
    v_.copy_from(v);
    step_ = steps;
}

template class AdamW<float>;
template class AdamW<double>;

}  // namespace levers::train
