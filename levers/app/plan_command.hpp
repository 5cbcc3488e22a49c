// `recipe plan NAME`: a run's memory per rank before it starts
// (levers/recipe/memory_plan.hpp), and --set micro_batch=auto for `recipe run`.
#pragma once

#include "levers/recipe/memory_plan.hpp"
#include "levers/recipe/recipe.hpp"

#include <optional>
#include <string>
#include <vector>

namespace levers {

struct PlanFlags {
    std::string name;
    std::vector<std::string> sets;
    std::optional<int> gpus;
    std::string device = "auto", precision = "f32", memory;
};

// Prints the plan; exit code 0 (errors are thrown, naming what is wrong).
int print_plan(const PlanFlags& flags);

// Whether --set micro_batch=auto is among `sets` (which then no longer holds it).
bool take_auto_micro_batch(std::vector<std::string>& sets);

// The plan's choice for `cfg` as it will run on `target`: the recipe's
// micro-batch parameter set to the largest divisor of its samples per step
// and rank that fits, and the grad_accum that keeps them (returned; the
// caller hands it to the loop). Throws levers::Error when not even one
// sample fits, naming what would.
long choose_micro_batch(const Recipe& recipe, Config& cfg, const PlanTarget& target);

}  // namespace levers
