#include "levers/recipe/loop_params.hpp"

#include "levers/distributed/context.hpp"
#include "levers/recipe/settings.hpp"

#include <algorithm>

namespace levers {

namespace {

// A setting's value where the recipe declares it, else the handle's default.
template <class T> T declared_or_default(const Config& cfg, const Param<T>& setting) {
    return cfg.has(setting.name()) ? cfg[setting] : setting.default_value();
}

}  // namespace

train::LoopOptions loop_options(const Config& cfg) {
    namespace s = settings;
    train::LoopOptions o;
    o.steps = cfg[s::steps];
    o.lr = {.peak = cfg[s::lr], .min_ratio = 0.1, .warmup = declared_or_default(cfg, s::warmup), .total = o.steps};
    o.adamw = {.lr = o.lr.peak, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
               .weight_decay = declared_or_default(cfg, s::weight_decay)};
    o.grad_clip = declared_or_default(cfg, s::grad_clip);
    const long log_every = declared_or_default(cfg, s::log_every);  // 0: a twentieth of the steps
    o.log_every = log_every > 0 ? log_every : std::max(1L, o.steps / 20);
    o.eval_every = declared_or_default(cfg, s::eval_every);
    o.grad_accum = declared_or_default(cfg, s::grad_accum);
    o.zero = declared_or_default(cfg, s::zero);
    return o;
}

std::int64_t rank_batch(const Config& cfg) {
    return dist::per_rank_batch(cfg[settings::batch_size], declared_or_default(cfg, settings::global_batch));
}

}  // namespace levers
