#include "levers/core/read_file.hpp"

#include "levers/core/error.hpp"

#include <fstream>
#include <iterator>

namespace levers {

std::string read_file(const std::filesystem::path& path, const std::string& if_missing) {
    std::error_code ec;
    LEVERS_CHECK(std::filesystem::exists(path, ec), "{}: no such file{}", path.string(),
                 if_missing.empty() ? "" : " (" + if_missing + ")");
    LEVERS_CHECK(std::filesystem::is_regular_file(path, ec), "{}: not a regular file", path.string());
    std::ifstream in(path, std::ios::binary);
    LEVERS_CHECK(in.good(), "{}: cannot be opened for reading", path.string());
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LEVERS_CHECK(!in.bad(), "{}: read error", path.string());
    return bytes;
}

}  // namespace levers
