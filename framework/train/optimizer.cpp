#include "framework/train/optimizer.hpp"

#include "framework/core/error.hpp"
#include "framework/train/param_kernels.hpp"

namespace levers::train {

AdamW::AdamW(ParamSet& params, const kernels::AdamWHyper& hyper)
    : params_(params),
      hyper_(hyper),
      m_(Tensor::persistent({params.size()}, params.dtype(), params.device())),
      v_(Tensor::persistent({params.size()}, params.dtype(), params.device())),
      chunks_(adamw_chunk_table(params)),
      params_seen_(params.params()) {}

void AdamW::step(double lr) {
    LEVERS_CHECK(params_.params().raw() == params_seen_.raw() && params_.size() == m_.numel(),
                 "AdamW: the model's parameters were laid out again after the optimizer was made (attach adapters, "
                 "freeze layers and move the model before training starts)");
    ++step_;
    kernels::AdamWHyper h = hyper_;
    h.lr = lr;
    ops::adamw_update(params_.params(), m_, v_, params_.grads(), chunks_, h, step_);
    params_.changed();
}

void AdamW::load(const Tensor& m, const Tensor& v, long steps) {
    LEVERS_CHECK(m.shape() == m_.shape() && v.shape() == v_.shape() && m.dtype() == m_.dtype() &&
                     v.dtype() == v_.dtype(),
                 "AdamW moments of shape {} do not fit {} parameters", m.shape().str(), params_.size());
    LEVERS_CHECK(steps >= 0, "AdamW step count must be >= 0, got {}", steps);
    m_.copy_from(m);
    v_.copy_from(v);
    step_ = steps;
}

}  // namespace levers::train
