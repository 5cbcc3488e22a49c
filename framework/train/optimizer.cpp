#include "framework/train/optimizer.hpp"

#include "framework/core/error.hpp"
#include "framework/train/param_kernels.hpp"

namespace levers::train {

template <class T>
AdamW<T>::AdamW(ParamSet<T>& params, const kernels::AdamWHyper& hyper)
    : params_(params),
      hyper_(hyper),
      m_(Tensor::zeros({params.size()}, dtype_of<T>(), params.device())),
      v_(Tensor::zeros({params.size()}, dtype_of<T>(), params.device())) {}

template <class T> void AdamW<T>::step(double lr) {
    ++step_;
    kernels::AdamWHyper h = hyper_;
    h.lr = lr;
    for (const auto& e : params_.entries()) {
        h.weight_decay = e.decay ? hyper_.weight_decay : 0.0;
        adamw_update(params_.device(), params_.params().template data<T>() + e.offset, m_.data<T>() + e.offset,
                     v_.data<T>() + e.offset, params_.grads().template data<T>() + e.offset, e.shape.numel(), h,
                     step_);
    }
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
