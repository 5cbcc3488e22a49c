// One `recipe run` of a benchmark, as a child process of `recipe bench`: its
// wall time, its result and its run directory (metrics.csv, time split).
#pragma once

#include "levers/recipe/recipe.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace levers::bench {

struct ChildRun {
    double wall_seconds = 0;
    Result result;
    std::filesystem::path dir;
};

// Runs `<this binary> run RECIPE --out DIR <args...>` to its end, its console
// in DIR.log. Throws levers::Error with the run's last error line if it fails.
ChildRun run_child(const std::string& recipe, const std::vector<std::string>& args, const std::filesystem::path& dir);

// Throughput after the first `warmup` steps, from the run's metrics.csv:
// items trained per second of training (evaluation excluded).
double steady_throughput(const std::filesystem::path& run_dir, long warmup);

// Items (tokens or samples) a step of the run trained on, all ranks: from its metrics.csv.
double items_per_step(const std::filesystem::path& run_dir);

// "name=0" for each of these the recipe declares, to pass with --set: the
// benchmark measures training, not evaluation, checkpoints or samples.
std::vector<std::string> quiet_sets(const Recipe& recipe);

// {"--set", s} for each s: the arguments of `recipe run`.
std::vector<std::string> as_set_flags(const std::vector<std::string>& sets);

}  // namespace levers::bench
