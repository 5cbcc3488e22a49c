// A fresh directory under the system temp dir, removed with its contents.
#pragma once

#include <filesystem>
#include <fstream>
#include <random>
#include <string>

namespace levers::testing {

class TempDir {
public:
    TempDir() {
        std::random_device rd;
        path_ = std::filesystem::temp_directory_path() / ("levers-test-" + std::to_string(rd()) + std::to_string(rd()));
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;

    const std::filesystem::path& path() const { return path_; }
    // Writes `bytes` to a file in this directory and returns its path.
    std::filesystem::path write(const std::string& name, const std::string& bytes) const {
        auto p = path_ / name;
        std::ofstream(p, std::ios::binary) << bytes;
        return p;
    }

private:
    std::filesystem::path path_;
};

}  // namespace levers::testing
