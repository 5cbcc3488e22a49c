#include "framework/recipe/loop_params.hpp"

namespace levers {

train::LoopOptions loop_options(const Config& cfg) {
    train::LoopOptions o;
    o.steps = cfg.get<long>("steps");
    o.lr = {.peak = cfg.get<double>("lr"), .min_ratio = 0.1, .warmup = cfg.get<long>("warmup"), .total = o.steps};
    o.adamw = {.lr = o.lr.peak, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
               .weight_decay = cfg.get<double>("weight_decay")};
    o.grad_clip = cfg.get<double>("grad_clip");
    o.log_every = cfg.get<long>("log_every");
    o.eval_every = cfg.get<long>("eval_every");
    return o;
}

}  // namespace levers
