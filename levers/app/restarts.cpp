#include "levers/app/restarts.hpp"

#include "levers/recipe/checkpoints.hpp"
#include "levers/recipe/run_dir.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <cstdio>
#include <ctime>
#include <fstream>

namespace levers {

namespace fs = std::filesystem;

void prepare_restart(const Recipe& r, RunContext& run, int restart, int of, const std::string& failure) {
    const fs::path& dir = run.dir;
    const auto checkpoint = r.framework_loop() ? newest_checkpoint(dir) : std::nullopt;
    if (checkpoint) run.resume = fs::absolute(*checkpoint);  // the loop drops the metrics rows after it
    // Without a checkpoint of its own the run starts again as it first did
    // (from the beginning, or from the checkpoint --resume named).
    const std::string from = checkpoint   ? fs::relative(*checkpoint, dir).string()
                             : run.resume.empty() ? std::string("the beginning (no checkpoint yet)")
                                                  : run.resume.string();
    fmt::print("recipe {}: {}; restart {} of {}, from {}\n", r.name(), failure.empty() ? "the job failed" : failure,
               restart, of, from);
    std::fflush(stdout);

    const fs::path log = dir / "restarts.json";
    nlohmann::json all = nlohmann::json::array();
    if (fs::exists(log)) all = nlohmann::json::parse(std::ifstream(log), nullptr, false);
    if (!all.is_array()) all = nlohmann::json::array();
    all.push_back({{"restart", restart},
                   {"of", of},
                   {"after", failure},
                   {"from", from},
                   {"at", fmt::format("{:%Y-%m-%dT%H:%M:%S%z}", fmt::localtime(std::time(nullptr)))}});
    write_json_file(log, all);
}

}  // namespace levers
