// Joining a job whose ranks an external launcher started (torchrun,
// accelerate, Slurm's srun, Open MPI's mpirun): the ranks meet at rank 0's
// TCP store (MASTER_ADDR:MASTER_PORT, by default 127.0.0.1:29500 as for
// torchrun; under torchrun, whose agent serves its own store on MASTER_PORT,
// the port after it; LEVERS_STORE_PORT overrides). On one node the store
// listens on loopback only, rank 0 creates the shared-memory segment and
// publishes its name, every rank maps it, and collectives then go through
// shared memory. Across nodes the store listens on MASTER_ADDR; CPU ranks
// share memory within each node and the nodes' leaders talk through Gloo
// (hierarchical_backend.hpp; LEVERS_NODE_ALLREDUCE=flat puts every rank in one
// Gloo group), and GPU ranks join one NCCL communicator, which carries the
// gradients and, staged through the GPU, the host collectives too.
#pragma once

#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/shm_segment.hpp"
#include "levers/launch/env_contract.hpp"

#include <chrono>
#include <memory>
#include <optional>

namespace levers::launch {

struct JoinedGroup {
    std::optional<dist::ShmSegment> segment;  // one node: the ranks' shared memory
    std::unique_ptr<dist::Backend> backend;   // host-memory collectives
    // Across nodes: the NCCL group (`backend` is staged through it). One node:
    // none yet; the caller makes it from the shared-memory store if it needs one.
    std::unique_ptr<dist::Backend> gpu_backend;
};

// Collective over the external job's ranks. `GPU`: the CUDA runtime index
// this rank computes on, or -1 for the CPU. The segment's name is removed as soon as every rank has mapped it,
// so nothing is left behind however the job ends. A job token in
// LEVERS_JOB_TOKEN keeps ranks of other jobs out of the store.
JoinedGroup join_external(const RankEnv& env, std::chrono::milliseconds timeout, int gpu = -1);

}  // namespace levers::launch
