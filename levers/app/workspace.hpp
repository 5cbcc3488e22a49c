// Workspace settings: what this user allows jobs to ask for.
//
// Kept in $XDG_CONFIG_HOME/levers/workspace.json (~/.config/levers/...), set
// with `recipe workspace multi-gpu on|off` and `recipe workspace max-gpus N`;
// LEVERS_MULTI_GPU (on/off) and LEVERS_MAX_GPUS override the file.
#pragma once

#include <filesystem>
#include <string>

namespace levers {

struct Workspace {
    bool multi_gpu = true;
    int max_gpus = 8;
    std::filesystem::path file;  // where it is kept
    // Where each setting came from: "default", the file's path, or the variable's name.
    std::string multi_gpu_from = "default", max_gpus_from = "default";

    // Throws levers::Error if a job of `gpus` GPUs is not allowed: naming
    // the command that would allow it where the node has `node_gpus` of
    // them (`unit`: "GPUs" or "CPU slots"), else the most it can ask for.
    void check(int gpus, int node_gpus, const std::string& unit) const;
};

std::filesystem::path workspace_file();
// The file's settings (defaults where absent), then the environment's.
// Throws levers::Error naming the file or variable that is malformed.
Workspace load_workspace();
// Sets one setting in the file ("multi-gpu" on|off, "max-gpus" N), atomically.
void set_workspace(const std::string& key, const std::string& value);

}  // namespace levers
