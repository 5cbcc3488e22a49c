// `recipe plot`: loss and evaluation curves of one or more runs (a sweep's
// directory stands for its cells), overlaid in one PNG drawn by gnuplot from
// each run's metrics.csv and eval.csv; or any metric its steps logged.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace levers {

// Writes `out`; throws levers::Error naming a directory without metrics or a
// missing gnuplot (and the package that provides it). With `metric`, draws
// that metric of every training step (metrics.jsonl: grpo's reward, dpo's
// rewards/margins, ...) instead of the loss and evaluation curves.
void plot_runs(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& out,
               const std::string& metric = "");

// Runs a gnuplot script that writes `out`; the same errors.
void run_gnuplot(const std::string& script, const std::filesystem::path& out);

// gnuplot's single-quoted string for `s`.
std::string gnuplot_quoted(const std::string& s);

}  // namespace levers
