#include "levers/recipe/loop_params.hpp"

#include <algorithm>

namespace levers {

train::LoopOptions loop_options(const Config& cfg) {
    auto get_or = [&](const char* name, auto fallback) {
        return cfg.has(name) ? cfg.get<decltype(fallback)>(name) : fallback;
    };
    train::LoopOptions o;
    o.steps = cfg.get<long>("steps");
    o.lr = {.peak = cfg.get<double>("lr"), .min_ratio = 0.1, .warmup = get_or("warmup", 0L), .total = o.steps};
    o.adamw = {.lr = o.lr.peak, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
               .weight_decay = get_or("weight_decay", 0.0)};
    o.grad_clip = get_or("grad_clip", 1.0);
    const long log_every = get_or("log_every", 0L);  // 0: a twentieth of the steps
    o.log_every = log_every > 0 ? log_every : std::max(1L, o.steps / 20);
    o.eval_every = get_or("eval_every", 0L);
    o.zero = static_cast<int>(get_or("zero", 0L));
    return o;
}

}  // namespace levers
