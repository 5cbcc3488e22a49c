// Sweeps: many independent trainings of one recipe, one job per cell.
//
// Cells that fit on free slots start at once; the rest queue and start as
// slots free up (the node's slot ledger decides: GPUs, or CPU cores). Each cell runs `<program> run RECIPE --out <sweep>/cell-NN ...` and
// writes its console to <sweep>/cell-NN.log. A failing cell is reported and
// does not stop the others.
#pragma once

#include "levers/recipe/map_cells.hpp"
#include "levers/recipe/recipe.hpp"

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace levers {


// The cartesian product of grid flags "name=v1,v2,..." (in the order given),
// each crossed with `base` cells (one empty cell when base is empty). Throws
// levers::Error naming a flag with no values or no '='.
std::vector<Cell> grid_cells(const std::vector<std::string>& grids, std::vector<Cell> base = {});
// Cells from a JSON file holding an array of objects ({"lr": 1e-3, "lora_r": 4}).
std::vector<Cell> read_cells_file(const std::filesystem::path& file);

struct SweepOptions {
    std::string recipe;
    std::vector<Cell> cells;
    std::vector<std::string> sets;  // --set name=value for every cell
    int gpus_per_cell = 1;
    int max_parallel = 0;          // 0: as many as the free GPUs allow
    std::filesystem::path dir;     // the sweep's run directory
    std::string program;           // the binary that runs a cell (this one)
    double timeout_s = 120;        // each cell's collective timeout
    Device::Kind device = Device::Kind::cpu;  // resolved, for every cell
    std::string precision = "f32";
    bool wait = true;              // false: fail when no GPU is free to start
};

struct CellOutcome {
    Cell params;
    bool ok = false;
    int exit_code = -1;
    double seconds = 0;
    Result result;      // the cell's result JSON (null when it failed)
    std::string error;  // the cell's last error line when it failed
    std::filesystem::path dir, log;

    Result to_json() const;
};

// The last line of a run's console log that holds "error:" (else its last line).
std::string last_error_line(const std::filesystem::path& log);

// Runs every cell; blocks until all have ended.
std::vector<CellOutcome> run_sweep(const SweepOptions& options);

// The console table and sweep.csv / sweep.json in `dir`.
void print_sweep_table(const std::vector<CellOutcome>& cells);
void write_sweep_report(const std::filesystem::path& dir, const std::vector<CellOutcome>& cells);

// Recipe::map's cells run as a sweep (registered by levers::main; see map_cells.hpp):
// the table printed, the report written, one result per cell.
std::vector<Result> run_map_cells(const MapCells& job);

}  // namespace levers
