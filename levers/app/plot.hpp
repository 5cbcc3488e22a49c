// `recipe plot`: loss and evaluation curves of one or more runs (a sweep's
// directory stands for its cells), overlaid in one PNG drawn by gnuplot from
// each run's metrics.csv and eval.csv.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace levers {

// Writes `out`; throws levers::Error naming a directory without metrics or a
// missing gnuplot (and the package that provides it).
void plot_runs(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& out);

// Runs a gnuplot script that writes `out`; the same errors.
void run_gnuplot(const std::string& script, const std::filesystem::path& out);

// gnuplot's single-quoted string for `s`.
std::string gnuplot_quoted(const std::string& s);

}  // namespace levers
