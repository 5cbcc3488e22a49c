// A run's config: the recipe's defaults or a checkpoint's, with --set on top,
// and the config.json every run directory starts with.
#pragma once

#include "levers/recipe/recipe.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace levers {

// Applies --set name=value flags to `cfg`, or to the recipe's defaults.
Config apply_sets(Config cfg, const std::vector<std::string>& sets);
Config resolve_config(const Recipe& r, const std::vector<std::string>& sets);

// A resumed run's config: the checkpoint's, then the --set flags on top. The
// whole file is read (and checked) here, so a corrupted checkpoint is refused
// before anything starts, not by the ranks.
Config resumed_config(const Recipe& r, const std::filesystem::path& checkpoint, const std::vector<std::string>& sets);

// Writes DIR/config.json: the recipe, its parameters, the ranks, the command.
void write_config(const std::filesystem::path& dir, const Recipe& r, const Config& cfg, int ranks, int argc,
                  char** argv);

// The result as one line of JSON (invalid UTF-8 in generated text replaced).
std::string result_text(const Result& result);

}  // namespace levers
