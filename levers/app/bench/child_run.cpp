#include "levers/app/bench/child_run.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/launch/child_setup.hpp"
#include "levers/app/sweep.hpp"

#include <boost/process.hpp>
#include <fmt/format.h>

#include <chrono>
#include <sstream>
#include <sys/wait.h>

namespace levers::bench {

namespace fs = std::filesystem;
namespace bp = boost::process;

ChildRun run_child(const std::string& recipe, const std::vector<std::string>& args, const fs::path& dir) {
    std::vector<std::string> all = {"run", recipe, "--out", dir.string()};
    all.insert(all.end(), args.begin(), args.end());
    const fs::path log = dir.string() + ".log";
    const auto start = std::chrono::steady_clock::now();
    bp::child child(bp::exe = fs::read_symlink("/proc/self/exe").string(), bp::args = all, bp::std_in < bp::null,
                    (bp::std_out & bp::std_err) > log.string(),
                    launch::DieWithParent{{}, getpid(), SIGTERM});
    child.wait();
    ChildRun run;
    run.wall_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    run.dir = dir;
    if (child.exit_code() != 0 || !fs::exists(dir / "result.json"))
        LEVERS_FAIL("the benchmark run `{}` failed (exit {}): {}; its log: {}", fmt::join(all, " "),
                    child.exit_code(), last_error_line(log), log.string());
    run.result = nlohmann::json::parse(read_file(dir / "result.json"));
    return run;
}

double steady_throughput(const fs::path& run_dir, long warmup) {
    std::istringstream in(read_file(run_dir / "metrics.csv"));
    std::string line;
    std::getline(in, line);  // step,loss,lr,grad_norm,items,items_per_second,wall_s
    double items0 = 0, wall0 = 0, items1 = 0, wall1 = 0;
    bool started = false;
    while (std::getline(in, line)) {
        std::vector<double> v;
        std::istringstream cells(line);
        for (std::string cell; std::getline(cells, cell, ',');) v.push_back(std::stod(cell));
        LEVERS_CHECK(v.size() == 7, "{}: a metrics row of {} columns, expected 7", (run_dir / "metrics.csv").string(),
                     v.size());
        if (static_cast<long>(v[0]) == warmup || (!started && warmup == 0)) {
            // Measure from the end of the warm-up (or from the first step).
            items0 = warmup == 0 ? 0 : v[4];
            wall0 = warmup == 0 ? 0 : v[6];
            started = true;
        }
        items1 = v[4];
        wall1 = v[6];
    }
    LEVERS_CHECK(started && wall1 > wall0, "{}: fewer steps than the warm-up of {}", run_dir.string(), warmup);
    return (items1 - items0) / (wall1 - wall0);
}

std::vector<std::string> quiet_sets(const Recipe& recipe) {
    std::vector<std::string> sets;
    for (const auto& p : recipe.params())
        if (p.name == settings::checkpoint_every.name() || p.name == settings::eval_every.name() ||
            p.name == "sample_tokens")  // the language-model recipes' own (recipes/lm_params.hpp)
            sets.push_back(p.name + "=0");
    return sets;
}

std::vector<std::string> as_set_flags(const std::vector<std::string>& sets) {
    std::vector<std::string> flags;
    for (const auto& s : sets) flags.insert(flags.end(), {"--set", s});
    return flags;
}

double items_per_step(const fs::path& run_dir) {
    std::istringstream in(read_file(run_dir / "metrics.csv"));
    std::string line, last;
    std::getline(in, line);  // header
    while (std::getline(in, line))
        if (!line.empty()) last = line;
    LEVERS_CHECK(!last.empty(), "{}: no training step recorded", (run_dir / "metrics.csv").string());
    std::vector<double> v;
    std::istringstream cells(last);
    for (std::string cell; std::getline(cells, cell, ',');) v.push_back(std::stod(cell));
    return v.at(4) / v.at(0);  // items so far / steps so far
}

}  // namespace levers::bench
