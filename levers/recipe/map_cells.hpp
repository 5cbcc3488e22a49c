#pragma once
// How Recipe::map runs its cells. Running them takes the sweep's machinery (child
// processes, the slot ledger's queue), which lives in the application layer
// above this one; the application registers it here when the command line
// starts (levers::main), so the recipe layer only declares what it needs.

#include "levers/core/device.hpp"
#include "levers/recipe/recipe.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace levers {

using Cell = std::map<std::string, std::string>;  // parameter overrides, as text

// One map() call, checked: every cell's config is valid.
struct MapCells {
    std::string recipe;
    std::vector<Cell> cells;
    std::vector<std::string> sets;  // name=value, for every cell
    std::filesystem::path dir;      // the sweep's directory, made
    Device::Kind device;            // where the calling job computes
    std::string precision;
};

// Checks every cell's config (`base` with the cell's overrides) before any
// starts, as `recipe run` checks one; throws levers::Error for the first that
// fails, its message prefixed "cell N: " (from 0).
void check_cells(const Recipe& plan, const Config& base, const std::vector<Cell>& cells);

// Runs the cells and returns one result per cell, in order.
using MapRunner = std::vector<Result> (*)(const MapCells&);
void set_map_runner(MapRunner runner);

}  // namespace levers
