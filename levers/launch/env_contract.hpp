// The environment contract between a launcher and its ranks: where a rank
// process finds its place in the job. The variables, torchrun's and Open
// MPI's, Slurm's and levers' own, are described in the manual,
// levers/core/environment.hpp (`recipe help env`).
#pragma once

#include "levers/core/device.hpp"

#include <string>

namespace levers::launch {

struct RankEnv {
    int rank = 0;
    int world_size = 1;
    int local_rank = 0;
    int local_world_size = 1;
    std::string master_addr;  // empty when not set
    int master_port = 0;
    std::string segment;  // empty unless started by levers' launcher
    std::string job_id;
    Device::Kind device = Device::Kind::cpu;
    int threads = 0;          // 0: not set
    long timeout_ms = 0;      // 0: not set
    std::string source = "none";  // which variables were found: none, levers, torchrun, slurm, openmpi

    bool distributed() const { return world_size > 1; }
};

// Reads the contract from the environment; throws levers::Error naming the
// variable if one is malformed or inconsistent (e.g. RANK >= WORLD_SIZE).
RankEnv read_rank_env();

}  // namespace levers::launch
