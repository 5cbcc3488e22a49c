// Run directories: where a run keeps its resolved config, per-rank logs,
// checkpoints and result.
//
//   runs/NAME/20261129-181502/   config.json  rank0.log ...  result.json
//   runs/NAME/latest -> 20261129-181502
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace levers {

// Creates the run directory: `out` if given (it must be empty or absent), else
// a new one under ./runs/NAME named by the time after `prefix`, and points
// runs/NAME/<prefix>latest at it. Throws levers::Error naming the directory if
// it cannot be made or is in use.
std::filesystem::path make_run_dir(const std::string& recipe, const std::string& out, const std::string& prefix = "");

// This rank's run directory (empty when there is none, as in unit tests);
// launched ranks find it in LEVERS_RUN_DIR.
std::filesystem::path run_dir();
void set_run_dir(const std::filesystem::path& dir);  // also exports LEVERS_RUN_DIR

// The checkpoint this run resumes from (empty: none); launched ranks find it
// in LEVERS_RESUME.
std::filesystem::path resume_from();
void set_resume_from(const std::filesystem::path& checkpoint);  // also exports LEVERS_RESUME

// Writes JSON atomically (temporary file, then rename): readers never see half of it.
void write_json_file(const std::filesystem::path& path, const nlohmann::json& j);

}  // namespace levers
