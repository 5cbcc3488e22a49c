// `recipe plot`: loss and evaluation curves of one or more runs (a sweep's
// directory stands for its cells), overlaid in one PNG drawn by gnuplot from
// each run's metrics.csv and eval.csv.
#pragma once

#include <filesystem>
#include <vector>

namespace levers {

// Writes `out`; throws levers::Error naming a directory without metrics or a
// missing gnuplot (and the package that provides it).
void plot_runs(const std::vector<std::filesystem::path>& runs, const std::filesystem::path& out);

}  // namespace levers
