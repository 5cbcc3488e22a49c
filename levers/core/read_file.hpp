// Whole-file reads with errors that name the file.
#pragma once

#include <filesystem>
#include <string>

namespace levers {

// The whole file as bytes. Throws levers::Error naming the path if it is
// missing ("<path>: no such file", then `if_missing` when given), not a
// regular file, or unreadable.
std::string read_file(const std::filesystem::path& path, const std::string& if_missing = "");

}  // namespace levers
