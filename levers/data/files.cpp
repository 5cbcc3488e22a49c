#include "levers/data/files.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"

#include <algorithm>
#include <cstdlib>
#include <unistd.h>

namespace levers::data {

namespace fs = std::filesystem;

constexpr const char* kInstallHint = "run the set-up command in README.md to install data";

fs::path data_dir() {
    if (const char* d = env::get("LEVERS_DATA")) return d;
    if (const char* x = env::get("XDG_DATA_HOME")) return fs::path(x) / "levers";
    const char* home = env::get("HOME");
    return fs::path(home && *home ? home : ".") / ".local" / "share" / "levers";
}

std::string read_data_file(const fs::path& path) { return read_file(path, kInstallHint); }

std::vector<fs::path> list_files(const fs::path& dir, const std::string& suffix) {
    std::error_code ec;
    LEVERS_CHECK(fs::is_directory(dir, ec), "{}: not a directory ({})", dir.string(), kInstallHint);
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().string().ends_with(suffix)) out.push_back(entry.path());
    std::sort(out.begin(), out.end());
    LEVERS_CHECK(!out.empty(), "{}: holds no *{} file", dir.string(), suffix);
    return out;
}

void write_directory(const fs::path& dir, const std::string& what, const std::function<bool(const fs::path&)>& ours,
                     const std::function<void(const fs::path&)>& fill) {
    LEVERS_CHECK(!fs::exists(dir) || (fs::is_directory(dir) && (fs::is_empty(dir) || ours(dir))),
                 "{}: exists and is not {}; give a new or empty directory", dir.string(), what);
    const fs::path partial = dir.string() + ".partial-" + std::to_string(::getpid());
    fs::remove_all(partial);
    fs::create_directories(partial);
    try {
        fill(partial);
        if (fs::exists(dir)) fs::remove_all(dir);
        fs::rename(partial, dir);
    } catch (...) {
        fs::remove_all(partial);
        throw;
    }
}

}  // namespace levers::data
