#include "levers/recipe/run_dir.hpp"

#include <nlohmann/json.hpp>

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <unistd.h>

namespace levers {

namespace fs = std::filesystem;

fs::path make_run_dir(const std::string& recipe, const std::string& out, const std::string& prefix) {
    std::error_code ec;
    fs::path dir;
    if (!out.empty()) {
        dir = out;
        LEVERS_CHECK(!fs::exists(dir) || (fs::is_directory(dir) && fs::is_empty(dir)),
                     "--out {}: exists and is not an empty directory; give a new or empty one", dir.string());
        fs::create_directories(dir, ec);
        LEVERS_CHECK(!ec, "--out {}: cannot create it: {}", dir.string(), ec.message());
        return fs::absolute(dir);
    }
    const fs::path parent = fs::path("runs") / recipe;
    fs::create_directories(parent, ec);
    LEVERS_CHECK(!ec, "cannot create {}: {} (give --out DIR)", parent.string(), ec.message());
    const std::string stamp = prefix + fmt::format("{:%Y%m%d-%H%M%S}", fmt::localtime(std::time(nullptr)));
    // create_directory is atomic: two runs started in the same second get -2, -3, ...
    for (int n = 1; n < 1000; ++n) {
        dir = parent / (n == 1 ? stamp : fmt::format("{}-{}", stamp, n));
        if (fs::create_directory(dir, ec)) break;
        LEVERS_CHECK(!ec, "cannot create {}: {}", dir.string(), ec.message());
    }
    const fs::path latest = parent / (prefix + "latest"), tmp = parent / fmt::format(".latest.{}", ::getpid());
    fs::remove(tmp, ec);
    fs::create_directory_symlink(dir.filename(), tmp, ec);
    if (!ec) fs::rename(tmp, latest, ec);  // replaces the old link in one step
    return fs::absolute(dir);
}

std::vector<std::pair<std::string, std::string>> run_exports(const RunContext& run) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!run.dir.empty()) out.emplace_back("LEVERS_RUN_DIR", run.dir.string());
    if (!run.resume.empty()) out.emplace_back("LEVERS_RESUME", run.resume.string());
    if (run.micro_batch > 0) {
        out.emplace_back("LEVERS_MICRO_BATCH", std::to_string(run.micro_batch));
        out.emplace_back("LEVERS_GRAD_ACCUM", std::to_string(run.grad_accum));
    }
    return out;
}

RunContext exported_run() {
    const auto path = [](const char* name) {
        const char* v = env::get(name);
        return v && *v ? fs::path(v) : fs::path();
    };
    const auto count = [](const char* name) {
        const char* v = env::get(name);
        return v && *v ? std::atol(v) : 0L;
    };
    return {.dir = path("LEVERS_RUN_DIR"), .resume = path("LEVERS_RESUME"), .micro_batch = count("LEVERS_MICRO_BATCH"),
            .grad_accum = count("LEVERS_GRAD_ACCUM")};
}

void write_json_file(const fs::path& path, const nlohmann::json& j) {
    const fs::path tmp = path.string() + fmt::format(".tmp{}", ::getpid());
    {
        std::ofstream out(tmp);
        out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
        LEVERS_CHECK(out.good(), "cannot write {}", tmp.string());
    }
    fs::rename(tmp, path);
}

}  // namespace levers
