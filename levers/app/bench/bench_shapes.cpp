#include "levers/app/bench/bench_commands.hpp"

#include "levers/app/bench/bench_output.hpp"
#include "levers/app/bench/child_run.hpp"
#include "levers/core/error.hpp"
#include "levers/recipe/device_choice.hpp"
#include "levers/app/sweep.hpp"

#include <fmt/format.h>

#include <chrono>

namespace levers::bench {

namespace fs = std::filesystem;

int bench_shapes(const ShapesFlags& f) {
    Recipe r = find_recipe(f.recipe);
    LEVERS_CHECK(f.cells >= 2, "--cells must be >= 2, got {}", f.cells);
    LEVERS_CHECK(f.steps >= 1, "--steps must be >= 1, got {}", f.steps);
    LEVERS_CHECK(r.defaults().has(settings::seed.name()), "recipe '{}' declares no seed: its cells could not differ", r.name());
    const fs::path dir = bench_dir(r.name(), f.out, "shapes");
    fmt::print("bench shapes {}: {} one-GPU cells as a sweep against one {}-GPU run of the same total work, "
               "{} steps; results in {}\n", r.name(), f.cells, f.cells, f.steps, dir.string());
    std::fflush(stdout);
    std::vector<std::string> common = quiet_sets(r);
    common.push_back(fmt::format("steps={}", f.steps));
    common.insert(common.end(), f.sets.begin(), f.sets.end());
    std::vector<std::string> one_args = {"--threads", "1"};
    for (const auto& flag : as_set_flags(common)) one_args.push_back(flag);

    auto one = run_child(r.name(), one_args, dir / "one_cell");
    fmt::print("  one cell alone: {:.2f} s\n", one.wall_seconds);

    SweepOptions o;
    o.recipe = r.name();
    for (int c = 0; c < f.cells; ++c) o.cells.push_back({{settings::seed.name(), std::to_string(c + 1)}});
    o.sets = common;
    o.program = fs::read_symlink("/proc/self/exe").string();
    o.device = resolve_device("auto", 1);  // where `recipe run` puts the single cell
    o.dir = dir / "sweep";
    fs::create_directories(o.dir);
    const auto t0 = std::chrono::steady_clock::now();
    auto cells = run_sweep(o);
    const double sweep_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& c : cells) LEVERS_CHECK(c.ok, "a sweep cell failed: {} (log {})", c.error, c.log.string());
    fmt::print("  {} cells as a sweep: {:.2f} s\n", f.cells, sweep_s);

    auto args = one_args;
    args.insert(args.begin(), {"--gpus", std::to_string(f.cells), "--output", "rank0"});
    auto together = run_child(r.name(), args, dir / "distributed");
    fmt::print("  one {}-GPU run: {:.2f} s\n", f.cells, together.wall_seconds);

    const double work = f.cells;  // in units of one cell's training
    report({{"shape", "wall_s", "cells_of_work_per_hour", "vs_one_cell"},
            {"one cell alone", fmt::format("{:.2f}", one.wall_seconds), fmt::format("{:.1f}", 3600 / one.wall_seconds),
             "1.00x"},
            {fmt::format("{} cells as a sweep", f.cells), fmt::format("{:.2f}", sweep_s),
             fmt::format("{:.1f}", work * 3600 / sweep_s), fmt::format("{:.2f}x", work * one.wall_seconds / sweep_s)},
            {fmt::format("one {}-GPU run", f.cells), fmt::format("{:.2f}", together.wall_seconds),
             fmt::format("{:.1f}", work * 3600 / together.wall_seconds),
             fmt::format("{:.2f}x", work * one.wall_seconds / together.wall_seconds)}},
           dir / "shapes.csv", dir / "shapes.md");
    fmt::print("(vs_one_cell: the work done per second against one cell alone; {} is ideal)\n", f.cells);
    return 0;
}

}  // namespace levers::bench
