// The loop the framework owns for recipes declared with .model/.data/.step:
// builds the model and data on every rank, trains with train::train_loop
// (gradients averaged over ranks), evaluates, stops early, writes checkpoints
// to the run directory, and assembles the result.
#pragma once

#include "levers/recipe/recipe.hpp"

namespace levers {

// The loop's settings from the config (loop_params.hpp, then the spec's counts and .adjust_loop).
train::LoopOptions framework_loop_options(const LoopSpec& spec, const Config& cfg);

Result run_framework_loop(const std::string& recipe, const LoopSpec& spec, const Config& cfg);

}  // namespace levers
