// The training-loop parameters recipes share, read from a recipe's config.
#pragma once

#include "levers/recipe/config.hpp"
#include "levers/train/loop.hpp"

namespace levers {

// Loop options from the parameters steps and lr (required), and warmup (0),
// weight_decay (0), grad_clip (1), log_every (steps/20), eval_every (0) and zero (0)
// where declared. The schedule decays to a tenth of lr; AdamW's betas are
// (0.9, 0.999): set others after.
train::LoopOptions loop_options(const Config& cfg);

}  // namespace levers
