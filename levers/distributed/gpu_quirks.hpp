// GPU quirks: what particular GPUs need before the first collective, in one
// table. Each quirk names the GPUs it applies to (by a substring of the name
// CUDA reports), the NCCL environment it sets and why; a variable the user
// already set wins. A GPU that needs a newer NCCL than the one loaded is an
// error that names the package to install.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace levers::dist {

struct GpuQuirk {
    std::string gpu;     // substring of the device name, e.g. "RTX PRO 6000"
    std::string env;      // NCCL variable to set ("" if the quirk is a version floor only)
    std::string value;
    int min_nccl = 0;     // ncclGetVersion code the GPU needs (0: none), e.g. 22600 for 2.26
    std::string why;
};

const std::vector<GpuQuirk>& gpu_quirks();

struct QuirkPlan {
    std::vector<std::pair<std::string, std::string>> set;  // variables to export
    std::vector<std::string> kept;                         // quirk variables the user had set: theirs wins
    std::string line;                                      // the one line to print ("" when nothing applies)
};

// What the quirks do for these GPUs, given the environment (`read_env`) and the
// loaded NCCL's version code (ncclGetVersion: 22809 for 2.28.9). Throws
// levers::Error naming the GPU, the NCCL found and the package needed when a
// GPU needs a newer NCCL.
QuirkPlan plan_quirks(const std::vector<std::string>& device_names, int nccl_version,
                      const std::function<const char*(const char*)>& read_env);

// Exports plan.set (never overwriting) and prints plan.line once.
void apply_quirks(const QuirkPlan& plan);

// "2.28.9" from 22809 (and the older 2-digit scheme, 2708 -> "2.7.8").
std::string nccl_version_text(int code);

}  // namespace levers::dist
