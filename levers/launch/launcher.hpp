// Runs one job as N rank processes on this node and supervises them.
//
// Spawns the program N times (Boost.Process) with the env contract of
// env_contract.hpp, forwards each rank's output line by line with a
// "[rank N]" prefix, forwards SIGINT/SIGTERM to every rank (then SIGKILL after
// a grace period), and on the first rank that fails aborts the process group,
// stops every other rank and reports which rank failed, how, and its last
// lines. Ranks die with the launcher (PR_SET_PDEATHSIG) and inherit no file
// descriptor beyond stdin, stdout and stderr. The job's segment is removed
// however the job ends.
#pragma once

#include "levers/core/device.hpp"

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace levers::launch {

struct LaunchOptions {
    std::string program;             // the binary each rank runs
    std::vector<std::string> args;   // its arguments
    int ranks = 2;
    int threads_per_rank = 1;
    Device::Kind device = Device::Kind::cpu;
    std::vector<int> cuda_gpus;     // cuda: the node's GPUs the job holds; rank r computes on the r-th
    std::chrono::milliseconds timeout{std::chrono::minutes(5)};  // for every collective
    std::chrono::milliseconds grace{1000};  // between SIGTERM and SIGKILL when stopping
    bool all_output = true;          // false: rank 0's lines only
    bool live_progress = false;      // our stdout is a terminal: draw rank 0's progress line in place
    std::filesystem::path log_dir;   // if set: each rank's output also goes to rank<N>.log there
    std::vector<std::pair<std::string, std::string>> env;  // set for every rank, beside the contract's variables
    std::size_t slot_bytes = std::size_t{2} << 20;  // fits L2: measured fastest (bench/allreduce.sh)
};

struct LaunchResult {
    int exit_code = 0;                  // 0 if every rank succeeded
    std::optional<std::string> result;  // rank 0's published result
    bool interrupted = false;           // stopped by SIGINT or SIGTERM, not by a failing rank
    std::string failure;                // the verdict: "rank 1 was killed by signal 9 (SIGKILL)"
};

LaunchResult launch(const LaunchOptions& options);

}  // namespace levers::launch
