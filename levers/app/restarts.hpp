// `recipe run --restarts K`, as torchrun's --max-restarts: when a rank fails,
// the launcher stops the job and starts it again, up to K times, from the
// run's latest training checkpoint (or from where it began, if it has none),
// in the same run directory. The config is the checkpoint's, as for --resume.
#pragma once

#include "levers/recipe/recipe.hpp"

#include <filesystem>
#include <string>

namespace levers {

// Prepares restart `restart` of `of` after `failure` ("rank 1 was killed by
// signal 9 (SIGKILL)"): points `run` at the newest checkpoint in its
// directory (the next ranks' LEVERS_RESUME), says so on the console and
// appends it to DIR/restarts.json.
void prepare_restart(const Recipe& r, RunContext& run, int restart, int of, const std::string& failure);

}  // namespace levers
