// The framework's settings (settings.hpp) read from a recipe's config: the
// loop's options and this rank's micro-batch.
#pragma once

#include "levers/recipe/config.hpp"
#include "levers/train/loop.hpp"

#include <cstdint>

namespace levers {

// Loop options from the settings steps and lr (required), and warmup (0),
// weight_decay (0), grad_clip (1), log_every (steps/20), eval_every (0),
// grad_accum (1) and zero (0) where declared. The schedule decays to a tenth
// of lr; AdamW's betas are (0.9, 0.999): set others after.
train::LoopOptions loop_options(const Config& cfg);

// This rank's micro-batch: settings::batch_size, or settings::global_batch
// split evenly over the ranks where it is > 0 (throws levers::Error naming
// both if it does not split).
std::int64_t rank_batch(const Config& cfg);

}  // namespace levers
