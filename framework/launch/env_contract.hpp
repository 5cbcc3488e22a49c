// The environment contract between a launcher and its ranks.
//
// Every rank process finds its place in the job in these variables (torchrun's
// names, so code written for torchrun keeps working):
//
//   RANK              this process's rank, 0 .. WORLD_SIZE-1
//   WORLD_SIZE        number of ranks in the job
//   LOCAL_RANK        rank among the processes on this node (selects the card)
//   LOCAL_WORLD_SIZE  number of ranks on this node
//   MASTER_ADDR       address of rank 0's rendezvous store (external launchers)
//   MASTER_PORT       its port
//
// plus levers' own, set by `recipe run --gpus N`:
//
//   LEVERS_SEGMENT    name of the job's shared-memory segment (POSIX shm)
//   LEVERS_JOB_ID     the job's id, for logs and the card ledger
//   LEVERS_DEVICE     cpu or cuda
//   LEVERS_THREADS    CPU threads this rank uses
//   LEVERS_TIMEOUT_MS collective timeout in milliseconds
//   LEVERS_JOB_TOKEN  (external launchers) a secret every rank of the job shares
//   LEVERS_STORE_PORT (external launchers) port of levers' rendezvous store
//   LEVERS_RUN_DIR    the job's run directory (config, logs, result)
//   LEVERS_CARDS      cards a sweep gave this job (it does not queue for them)
//
// and, read by the card ledger and workspace settings: LEVERS_LEDGER_DIR,
// LEVERS_CPU_SLOTS, LEVERS_MULTI_GPU, LEVERS_MAX_GPUS.
//
// Slurm's SLURM_PROCID / SLURM_NTASKS / SLURM_LOCALID / SLURM_NTASKS_PER_NODE
// and Open MPI's OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE are
// read when torchrun's names are absent. With none of them set, the process is
// a world of one.
#pragma once

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
    std::string device = "cpu";
    int threads = 0;          // 0: not set
    long timeout_ms = 0;      // 0: not set
    std::string source = "none";  // which variables were found: none, levers, torchrun, slurm, openmpi

    bool distributed() const { return world_size > 1; }
};

// Reads the contract from the environment; throws levers::Error naming the
// variable if one is malformed or inconsistent (e.g. RANK >= WORLD_SIZE).
RankEnv read_rank_env();

}  // namespace levers::launch
