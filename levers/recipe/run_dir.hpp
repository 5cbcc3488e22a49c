// Run directories: where a run keeps its resolved config, per-rank logs,
// checkpoints and result.
//
//   runs/NAME/20261129-181502/   config.json  rank0.log ...  result.json
//   runs/NAME/latest -> 20261129-181502
#pragma once

#include "levers/recipe/run_context.hpp"

#include <nlohmann/json_fwd.hpp>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace levers {

// Creates the run directory: `out` if given (it must be empty or absent), else
// a new one under ./runs/NAME named by the time after `prefix`, and points
// runs/NAME/<prefix>latest at it. Throws levers::Error naming the directory if
// it cannot be made or is in use.
std::filesystem::path make_run_dir(const std::string& recipe, const std::string& out, const std::string& prefix = "");

// The variables that hand `run`'s directory, checkpoint and micro-batch
// choice to the ranks a launcher starts (LEVERS_RUN_DIR, LEVERS_RESUME,
// LEVERS_MICRO_BATCH and LEVERS_GRAD_ACCUM; those left empty are not set).
std::vector<std::pair<std::string, std::string>> run_exports(const RunContext& run);
// Their reverse: what this rank's starter exported
// (levers' launcher, or recipe submit's script for the directory); empty
// where not set. The rest of the context is the defaults.
RunContext exported_run();

// Writes JSON atomically (temporary file, then rename): readers never see half of it.
void write_json_file(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace levers
