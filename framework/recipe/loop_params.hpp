// The training-loop parameters recipes share, read from a recipe's config.
#pragma once

#include "framework/recipe/config.hpp"
#include "framework/train/loop.hpp"

namespace levers {

// Loop options from the parameters steps, lr, warmup, weight_decay, grad_clip,
// log_every and eval_every (each must be declared by the recipe). The schedule
// decays to a tenth of lr; AdamW's betas are (0.9, 0.999): set others after.
train::LoopOptions loop_options(const Config& cfg);

}  // namespace levers
