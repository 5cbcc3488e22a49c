// The slots (GPUs, or CPU cores) a `recipe run` job takes from the node's
// ledger, and the line that says where it runs.
#pragma once

#include "levers/core/device.hpp"
#include "levers/recipe/recipe.hpp"

#include <filesystem>
#include <string>
#include <vector>

namespace levers {

// Checks that `ranks` fit the node and the workspace's limit, saying once when
// CPU ranks will share cores; throws levers::Error (exit 2) if they cannot run.
void check_job_fits(int ranks, Device::Kind device);

// The slots this job runs on: given by the sweep that started it, else taken
// from the node's ledger (waiting for them when `wait`): a GPU per rank, or
// on the CPU ranks x threads cores, or all.
std::vector<int> take_slots(const Recipe& r, int ranks, int threads, bool wait, Device::Kind device);

// "recipe NAME: 2 CPU ranks, 1 thread each, on slots 0,1; run directory DIR"
void announce_placement(const Recipe& r, int ranks, int threads, const std::vector<int>& slots, Device::Kind device,
                        DType compute, const std::filesystem::path& dir);

}  // namespace levers
