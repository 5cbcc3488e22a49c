#include "levers/recipe/map_cells.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"
#include "levers/launch/slot_ledger.hpp"
#include "levers/recipe/run_dir.hpp"

#include <fmt/format.h>

namespace levers {

namespace fs = std::filesystem;

namespace {

MapRunner registered = nullptr;

// map-NAME inside the run's directory (map-NAME-2, -3, ... for later calls), or
// a run directory of its own when the caller has none.
fs::path map_dir(const std::string& recipe, const fs::path& here) {
    if (here.empty()) return make_run_dir(recipe, "", "map-");
    fs::path dir = here / fmt::format("map-{}", recipe);
    for (int n = 2; fs::exists(dir); ++n) dir = here / fmt::format("map-{}-{}", recipe, n);
    return dir;
}

}  // namespace

void set_map_runner(MapRunner runner) { registered = runner; }

void check_cells(const Recipe& plan, const Config& base, const std::vector<Cell>& cells) {
    for (std::size_t i = 0; i < cells.size(); ++i) {
        Config c = base;
        try {
            for (const auto& [k, v] : cells[i]) c.set(k, v);
            plan.check(c);
        } catch (const Error& e) {
            LEVERS_FAIL("cell {}: {}", i, e.message());
        }
    }
}

std::vector<Result> Recipe::map(const RunContext& from, const std::vector<Cell>& cells, const Cell& every_cell) const {
    LEVERS_CHECK(registered, "map(): recipe '{}' runs its cells through the recipe command (levers::main), which "
                 "this program did not start from", name());
    LEVERS_CHECK(is_registered(name()), "map(): recipe '{}' must be registered with LEVERS_RECIPE in this binary, "
                 "which runs its cells", name());
    LEVERS_CHECK(env::get("LEVERS_SEGMENT") == nullptr && env::get("WORLD_SIZE") == nullptr,
                 "map(): a sweep starts from a one-GPU job, not from a rank of a multi-GPU one");
    Config base = defaults();
    try {
        for (const auto& [k, v] : every_cell) base.set(k, v);
        check_cells(*this, base, cells);
    } catch (const Error& e) {
        LEVERS_FAIL("map(): {}", e.message());
    }
    MapCells job{.recipe = name(), .cells = cells, .dir = map_dir(name(), from.dir)};
    for (const auto& [k, v] : every_cell) job.sets.push_back(k + "=" + v);
    job.device = dist::device().kind;  // the cells compute where this job does
    job.precision = std::string(name_of(from.compute));
    fs::create_directories(job.dir);
    launch::job_lease().release();  // this job's GPU is idle while its cells run: they need it
    return registered(job);
}

}  // namespace levers
