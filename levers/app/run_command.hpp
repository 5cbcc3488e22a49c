// `recipe run`: one job of a recipe, in place on one GPU or as one process
// per GPU, in its own run directory, on GPUs taken from the node's ledger.
// The pieces: run_config (config and resume), job_slots (the ledger, where it
// runs), rank_join (in place, or joining as a launched or external rank).
#pragma once

#include "levers/recipe/recipe.hpp"

#include <optional>
#include <string>
#include <vector>

namespace levers {

struct RunFlags {
    std::string name;
    std::vector<std::string> sets;
    int threads = 0;
    std::optional<int> gpus;  // unset: the recipe's default
    std::string device = "auto";
    std::string precision = "f32";
    std::string output = "all";
    std::string out;  // the run directory (default: runs/NAME/<time>)
    double timeout_s = 120;
    bool wait = true;  // for GPUs
    std::optional<std::string> resume;  // --resume PATH|latest
    int restarts = 0;  // --restarts K: a failed job starts again from its latest checkpoint, K times at most
    std::string memory;  // --memory SIZE: each rank's, for --set micro_batch=auto (default: the device's)
};

// Returns the exit code; throws levers::Error for bad input (exit 2).
int run_recipe(const RunFlags& flags, int argc, char** argv);

}  // namespace levers
