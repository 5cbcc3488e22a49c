// `recipe status` (the node's GPUs or CPU slots, their holders, who waits,
// the workspace settings, levers jobs in Slurm's queue) and `recipe
// workspace` (show or change what jobs may ask for).
#pragma once

#include <string>
#include <vector>

namespace levers {

int show_status();
// `words`: empty to show, or a setting and its value. Throws levers::Error naming a bad one.
int change_workspace(const std::vector<std::string>& words);

}  // namespace levers
