// Where levers keeps its data, and whole-file reads with errors that name the file.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace levers::data {

// $LEVERS_DATA if set, else $XDG_DATA_HOME/levers, else ~/.local/share/levers.
// The set-up script installs the corpus and tokenizer files there.
std::filesystem::path data_dir();

// The whole file as bytes; throws levers::Error naming the path if it is missing,
// not a regular file, or unreadable.
std::string read_file(const std::filesystem::path& path);

// Regular files directly in `dir` whose names end with `suffix`, sorted by name.
// Throws if `dir` is not a directory or holds no such file.
std::vector<std::filesystem::path> list_files(const std::filesystem::path& dir, const std::string& suffix);

}  // namespace levers::data
