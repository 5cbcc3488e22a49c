// Joining a job whose ranks an external launcher started (torchrun,
// accelerate, Slurm's srun, Open MPI's mpirun): the ranks meet at rank 0's
// TCP store (MASTER_ADDR:MASTER_PORT, by default 127.0.0.1:29500 as for
// torchrun; under torchrun, whose agent serves its own store on MASTER_PORT,
// the port after it; LEVERS_STORE_PORT overrides), rank 0 creates the shared-memory
// segment and publishes its name, every rank maps it, and collectives then go
// through shared memory. All ranks must share this node; a job across nodes
// on CPU ranks is refused (it needs a network backend levers does not have).
#pragma once

#include "framework/dist/shm_backend.hpp"
#include "framework/dist/shm_segment.hpp"
#include "framework/launch/env_contract.hpp"

#include <chrono>
#include <memory>

namespace levers::launch {

struct JoinedGroup {
    dist::ShmSegment segment;
    std::unique_ptr<dist::ShmBackend> backend;
};

// Collective over the external job's ranks. The segment's name is removed as
// soon as every rank has mapped it, so nothing is left behind however the job ends.
// A job token in LEVERS_JOB_TOKEN keeps ranks of other jobs out of the store.
JoinedGroup join_external(const RankEnv& env, std::chrono::milliseconds timeout);

}  // namespace levers::launch
