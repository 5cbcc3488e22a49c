#include "levers/app/sweep_command.hpp"

#include "levers/app/command.hpp"
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

namespace {

class SweepCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* sweep = command_ = app.add_subcommand("sweep", "Run many one-GPU trainings of a recipe side by side");
        sweep->add_option("name", flags_.name, "recipe name")->required();
        sweep->add_option("--grid", flags_.grids, "name=v1,v2,...: one cell per value (grids are crossed)");
        sweep->add_option("--cells", flags_.cells_file, "JSON file: an array of objects, one per cell");
        sweep->add_option("--set", flags_.sets, "set a parameter of every cell: --set name=value");
        sweep->add_option("--gpus-per-cell", flags_.gpus_per_cell, "GPUs per cell (default 1)");
        sweep->add_option("--max-parallel", flags_.max_parallel, "cells at once at most (default 0: as GPUs allow)");
        sweep->add_option("--out", flags_.out, "sweep directory (default: runs/NAME/sweep-<date-time>)");
        sweep->add_option("--timeout", flags_.timeout_s, "each cell's collective timeout in seconds");
        add_device_option(*sweep, flags_.device, "where every cell computes");
        add_precision_option(*sweep, flags_.precision, "what every cell computes in");
        sweep->add_flag("--no-wait", flags_.no_wait, "fail if no GPU is free instead of queueing");
        sweep->footer(ex("\nExamples:\n  {recipe} sweep {classify} --grid lr=1e-3,3e-3 --grid seed=1,2,3\n"
                         "  {recipe} sweep {fine_tune} --cells cells.json --max-parallel 2"));
    }
    int run(int, char**) override { return sweep_recipe(flags_); }

private:
    SweepFlags flags_;
};

}  // namespace

std::unique_ptr<Command> sweep_command() { return std::make_unique<SweepCommand>(); }

}  // namespace levers
