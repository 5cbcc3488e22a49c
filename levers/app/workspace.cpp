#include "levers/app/workspace.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/distributed/shm_backend.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <unistd.h>

namespace levers {

namespace fs = std::filesystem;

namespace {

bool parse_on_off(const std::string& v, const std::string& what) {
    if (v == "on" || v == "1" || v == "true") return true;
    if (v == "off" || v == "0" || v == "false") return false;
    LEVERS_FAIL("{}: '{}' is not on or off", what, v);
}

int parse_max_gpus(const std::string& v, const std::string& what) {
    char* end = nullptr;
    const long n = std::strtol(v.c_str(), &end, 10);
    LEVERS_CHECK(!v.empty() && *end == '\0' && n >= 1 && n <= 1024, "{}: '{}' is not a GPU count >= 1", what, v);
    return static_cast<int>(n);
}

nlohmann::json read_settings(const fs::path& file) {
    if (!fs::exists(file)) return nlohmann::json::object();
    auto j = nlohmann::json::parse(read_file(file), nullptr, false);
    LEVERS_CHECK(j.is_object(), "{} is not a JSON object; fix or delete it (recipe workspace rewrites it)",
                 file.string());
    return j;
}

}  // namespace

fs::path workspace_file() {
    if (const char* x = env::get("XDG_CONFIG_HOME")) return fs::path(x) / "levers" / "workspace.json";
    const char* home = env::get("HOME");
    return fs::path(home && *home ? home : ".") / ".config" / "levers" / "workspace.json";
}

Workspace load_workspace() {
    Workspace w;
    w.file = workspace_file();
    const auto j = read_settings(w.file);
    try {
        if (j.contains("multi_gpu")) {
            w.multi_gpu = j.at("multi_gpu").get<bool>();
            w.multi_gpu_from = w.file.string();
        }
        if (j.contains("max_gpus")) {
            w.max_gpus = parse_max_gpus(std::to_string(j.at("max_gpus").get<long>()), w.file.string());
            w.max_gpus_from = w.file.string();
        }
    } catch (const nlohmann::json::exception&) {
        LEVERS_FAIL("{}: multi_gpu must be true or false and max_gpus a positive integer", w.file.string());
    }
    if (const char* v = env::get("LEVERS_MULTI_GPU")) {
        w.multi_gpu = parse_on_off(v, "LEVERS_MULTI_GPU");
        w.multi_gpu_from = "LEVERS_MULTI_GPU";
    }
    if (const char* v = env::get("LEVERS_MAX_GPUS")) {
        w.max_gpus = parse_max_gpus(v, "LEVERS_MAX_GPUS");
        w.max_gpus_from = "LEVERS_MAX_GPUS";
    }
    return w;
}

void Workspace::check(int gpus, int node_gpus, const std::string& unit) const {
    constexpr int kNodeRanks = dist::ShmBackend::kMaxRanks;  // one node's process group holds no more
    const int fits = std::max(1, std::min(max_gpus, node_gpus));
    LEVERS_CHECK(gpus <= kNodeRanks, "--gpus {}: a job runs at most {} ranks on one node, and this node has {} {}; use "
                 "--gpus {} or fewer", gpus, kNodeRanks, node_gpus, unit, fits);
    LEVERS_CHECK(gpus <= 1 || multi_gpu,
                 "--gpus {}: multi-GPU jobs are off in this workspace (set by {}); turn them on with: {}", gpus,
                 multi_gpu_from,
                 multi_gpu_from == "LEVERS_MULTI_GPU" ? "LEVERS_MULTI_GPU=on" : "recipe workspace multi-gpu on");
    LEVERS_CHECK(gpus <= max_gpus, "--gpus {}: this workspace allows at most {} GPUs (set by {}); raise it with: {}{}",
                 gpus, max_gpus, max_gpus_from,
                 max_gpus_from == "LEVERS_MAX_GPUS" ? fmt::format("LEVERS_MAX_GPUS={}", gpus)
                                                    : fmt::format("recipe workspace max-gpus {}", gpus),
                 gpus > node_gpus ? fmt::format(", though this node has {} {}: ranks beyond them share them, or use "
                                                 "--gpus {} or fewer", node_gpus, unit, fits)
                                   : "");
}

void set_workspace(const std::string& key, const std::string& value) {
    const fs::path file = workspace_file();
    auto j = read_settings(file);
    if (key == "multi-gpu")
        j["multi_gpu"] = parse_on_off(value, "multi-gpu");
    else if (key == "max-gpus")
        j["max_gpus"] = parse_max_gpus(value, "max-gpus");
    else
        LEVERS_FAIL("unknown workspace setting '{}'; valid settings: multi-gpu, max-gpus", key);
    fs::create_directories(file.parent_path());
    const fs::path tmp = file.string() + ".tmp" + std::to_string(::getpid());
    {
        std::ofstream out(tmp);
        out << j.dump(2) << "\n";
        LEVERS_CHECK(out.good(), "cannot write {}", tmp.string());
    }
    fs::rename(tmp, file);
}

}  // namespace levers
