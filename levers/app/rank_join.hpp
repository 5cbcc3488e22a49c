// Running the recipe as one rank of a job: in place (a world of one), as a
// rank levers' launcher started (joined through the job's shared segment), or
// as a rank torchrun, Slurm or mpirun started (joined through their store).
#pragma once

#include "levers/app/run_command.hpp"
#include "levers/core/device.hpp"
#include "levers/launch/env_contract.hpp"

#include <functional>

namespace levers {

// Runs the recipe alone on `device` with `threads` CPU threads; `publish`
// receives its result. Returns the exit code (1: the recipe failed).
int run_in_place(const Recipe& r, const Config& cfg, const launch::RankEnv& env, Device device, int threads,
                 const std::function<void(const Result&)>& publish);

// This process is one rank of a job levers' launcher started: the result goes
// back through the segment, and the launcher prints it and logs the output.
int run_as_launched_rank(const Recipe& r, const Config& cfg, const launch::RankEnv& env, double timeout_s);

// This process is one rank of a job torchrun, Slurm or mpirun started: each
// rank logs its own output; rank 0 writes the config and result and prints it.
// `cfg` comes with its run's checkpoint; the rank adds its precision and the job's directory.
int run_as_external_rank(const Recipe& r, Config cfg, const launch::RankEnv& env, const RunFlags& flags, int argc,
                         char** argv);

}  // namespace levers
