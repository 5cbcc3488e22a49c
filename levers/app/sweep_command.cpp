#include "levers/app/sweep_command.hpp"

#include "levers/app/run_config.hpp"
#include "levers/app/sweep.hpp"
#include "levers/app/workspace.hpp"
#include "levers/core/error.hpp"
#include "levers/recipe/device_choice.hpp"
#include "levers/recipe/run_dir.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

namespace levers {

int sweep_recipe(const SweepFlags& f) {
    Recipe r = find_recipe(f.name);
    LEVERS_CHECK(f.gpus_per_cell >= 1, "--gpus-per-cell must be >= 1, got {}", f.gpus_per_cell);
    LEVERS_CHECK(f.max_parallel >= 0, "--max-parallel must be >= 0 (0: as many as GPUs allow), got {}",
                 f.max_parallel);
    LEVERS_CHECK(!f.grids.empty() || !f.cells_file.empty(), "recipe sweep needs --grid name=v1,v2,... or --cells FILE");
    std::vector<Cell> base = f.cells_file.empty() ? std::vector<Cell>{} : read_cells_file(f.cells_file);
    auto cells = grid_cells(f.grids, base);
    check_cells(r, resolve_config(r, f.sets), cells);
    const Device::Kind device = resolve_device(f.device, f.gpus_per_cell);
    const NodeSlots node = node_slots(device);
    load_workspace().check(f.gpus_per_cell, node.count, node.unit);
    resolve_precision(f.precision, device);  // refused here, not once per cell

    SweepOptions o;
    o.device = device;
    o.precision = f.precision;
    o.recipe = r.name();
    o.cells = std::move(cells);
    o.sets = f.sets;
    o.gpus_per_cell = f.gpus_per_cell;
    o.max_parallel = f.max_parallel;
    o.timeout_s = f.timeout_s;
    o.wait = !f.no_wait;
    o.program = std::filesystem::read_symlink("/proc/self/exe").string();
    o.dir = make_run_dir(r.name(), f.out, "sweep-");
    fmt::print("sweep {}: {} cells, {} GPU{} each; sweep directory {}\n", r.name(), o.cells.size(), o.gpus_per_cell,
               o.gpus_per_cell == 1 ? "" : "s", o.dir.string());
    std::fflush(stdout);
    std::vector<CellOutcome> outcomes;
    try {
        outcomes = run_sweep(o);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 1;
    }
    print_sweep_table(outcomes);
    write_sweep_report(o.dir, outcomes);
    const auto failed = std::count_if(outcomes.begin(), outcomes.end(), [](const CellOutcome& c) { return !c.ok; });
    fmt::print("{} of {} cells succeeded; results in {}/sweep.csv and sweep.json\n", outcomes.size() - failed,
               outcomes.size(), o.dir.string());
    return failed == 0 ? 0 : 1;
}

}  // namespace levers
