#include "levers/core/read_file.hpp"

#include "levers/core/error.hpp"

#include <fstream>

namespace levers {

std::string read_file(const std::filesystem::path& path, const std::string& if_missing) {
    std::error_code ec;
    LEVERS_CHECK(std::filesystem::exists(path, ec), "{}: no such file{}", path.string(),
                 if_missing.empty() ? "" : " (" + if_missing + ")");
    LEVERS_CHECK(std::filesystem::is_regular_file(path, ec), "{}: not a regular file", path.string());
    std::ifstream in(path, std::ios::binary);
    LEVERS_CHECK(in.good(), "{}: cannot be opened for reading", path.string());
    // One read of the size the file has (a character iterator runs at a tenth of the disk cache's speed).
    const auto size = std::filesystem::file_size(path, ec);
    LEVERS_CHECK(!ec, "{}: cannot be read: {}", path.string(), ec.message());
    std::string bytes(static_cast<std::size_t>(size), '\0');
    in.read(bytes.data(), static_cast<std::streamsize>(size));
    LEVERS_CHECK(!in.bad(), "{}: read error", path.string());
    bytes.resize(static_cast<std::size_t>(in.gcount()));  // a file that shrank meanwhile: what there was
    return bytes;
}

}  // namespace levers
