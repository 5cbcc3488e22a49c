#include "levers/train/optimizer.hpp"

#include "levers/core/error.hpp"
#include "levers/train/param_kernels.hpp"

namespace levers::train {

AdamW::AdamW(ParamSet& params, const kernels::AdamWHyper& hyper)
    : AdamW(params, hyper, FlatShard::whole(params.size())) {}

AdamW::AdamW(ParamSet& params, const kernels::AdamWHyper& hyper, FlatShard shard)
    : params_(params),
      hyper_(hyper),
      shard_(std::move(shard)),
      m_(Tensor::persistent({shard_.size()}, params.dtype(), params.device())),
      v_(Tensor::persistent({shard_.size()}, params.dtype(), params.device())),
      params_seen_(params.params()) {
    for (const auto& [b, e] : shard_.ranges) {
        LEVERS_CHECK(b >= 0 && b <= e && e <= params.size(), "AdamW: shard range [{}, {}) outside {} parameters", b,
                     e, params.size());
        chunks_.push_back(adamw_chunk_table(params, b, e));
    }
}

void AdamW::step(double lr) {
    LEVERS_CHECK(params_.params().raw() == params_seen_.raw() && params_.params().numel() == params_seen_.numel(),
                 "AdamW: the model's parameters were laid out again after the optimizer was made (attach adapters, "
                 "freeze layers and move the model before training starts)");
    ++step_;
    kernels::AdamWHyper h = hyper_;
    h.lr = lr;
    std::int64_t at = 0;  // where the range's moments start
    for (std::size_t i = 0; i < shard_.ranges.size(); ++i) {
        const auto [b, e] = shard_.ranges[i];
        ops::adamw_update(params_.param_slice(b, e), m_.slice(at, at + (e - b)), v_.slice(at, at + (e - b)),
                          params_.grad_slice(b, e), chunks_[i], h, step_);
        at += e - b;
    }
    params_.changed();
}

void AdamW::load(const Tensor& m, const Tensor& v, long steps) {
    const Shape whole({params_.size()});
    LEVERS_CHECK(m.shape() == whole && v.shape() == whole && m.dtype() == m_.dtype() && v.dtype() == v_.dtype(),
                 "AdamW moments of shape {} do not fit {} parameters", m.shape().str(), params_.size());
    LEVERS_CHECK(steps >= 0, "AdamW step count must be >= 0, got {}", steps);
    whole_to_shard(shard_, m, m_);
    whole_to_shard(shard_, v, v_);
    step_ = steps;
}

}  // namespace levers::train
