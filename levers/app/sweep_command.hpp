// `recipe sweep`: checks every cell's config, then runs the cells as a sweep
// (sweep.hpp) and reports them as a table, sweep.csv and sweep.json.
#pragma once

#include <string>
#include <vector>

namespace levers {

struct SweepFlags {
    std::string name, cells_file, out, device = "auto", precision = "f32";
    std::vector<std::string> grids, sets;
    int gpus_per_cell = 1, max_parallel = 0;
    double timeout_s = 120;
    bool no_wait = false;
};

// Returns the exit code (1 if a cell failed); throws levers::Error for bad input (exit 2).
int sweep_recipe(const SweepFlags& f);

}  // namespace levers
