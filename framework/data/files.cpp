#include "framework/data/files.hpp"

#include "framework/core/error.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>

namespace levers::data {

namespace fs = std::filesystem;

fs::path data_dir() {
    if (const char* d = std::getenv("LEVERS_DATA"); d && *d) return d;
    if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return fs::path(x) / "levers";
    const char* home = std::getenv("HOME");
    return fs::path(home && *home ? home : ".") / ".local" / "share" / "levers";
}

std::string read_file(const fs::path& path) {
    std::error_code ec;
    LEVERS_CHECK(fs::exists(path, ec), "{}: no such file (run the set-up command in README.md to install data)",
                 path.string());
    LEVERS_CHECK(fs::is_regular_file(path, ec), "{}: not a regular file", path.string());
    std::ifstream in(path, std::ios::binary);
    LEVERS_CHECK(in.good(), "{}: cannot be opened for reading", path.string());
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LEVERS_CHECK(!in.bad(), "{}: read error", path.string());
    return bytes;
}

std::vector<fs::path> list_files(const fs::path& dir, const std::string& suffix) {
    std::error_code ec;
    LEVERS_CHECK(fs::is_directory(dir, ec), "{}: not a directory (run the set-up command in README.md to install data)",
                 dir.string());
    std::vector<fs::path> out;
    for (const auto& entry : fs::directory_iterator(dir))
        if (entry.is_regular_file() && entry.path().string().ends_with(suffix)) out.push_back(entry.path());
    std::sort(out.begin(), out.end());
    LEVERS_CHECK(!out.empty(), "{}: holds no *{} file", dir.string(), suffix);
    return out;
}

}  // namespace levers::data
