// Where levers keeps its data, and reads of data files with errors that name them.
#pragma once

#include "levers/core/read_file.hpp"

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace levers::data {

// $LEVERS_DATA if set, else $XDG_DATA_HOME/levers, else ~/.local/share/levers.
// The set-up script installs the corpus and tokenizer files there.
std::filesystem::path data_dir();

// read_file (levers/core/read_file.hpp) for a data file: a missing one
// also says how to install the data.
std::string read_data_file(const std::filesystem::path& path);

// Regular files directly in `dir` whose names end with `suffix`, sorted by name.
// Throws if `dir` is not a directory or holds no such file.
std::vector<std::filesystem::path> list_files(const std::filesystem::path& dir, const std::string& suffix);

// Makes directory `dir` whole or not at all: `fill` writes into a fresh
// directory beside it, which is then renamed into place. An existing `dir`
// is replaced only if it is empty or `ours` says levers (or its peers) wrote
// it; otherwise nothing is written and the error names it. `what` names the
// kind of directory in that error ("a model directory").
void write_directory(const std::filesystem::path& dir, const std::string& what,
                     const std::function<bool(const std::filesystem::path&)>& ours,
                     const std::function<void(const std::filesystem::path&)>& fill);

}  // namespace levers::data
