// Every environment variable levers reads, and what it means: the table below
// is the manual (`recipe help env` prints it), and env::get, the one reader,
// refuses a name the table does not declare, so the two cannot drift apart.
//
// Launchers find their ranks through torchrun's names; Open MPI's and Slurm's
// are read when torchrun's are absent, and with none of them a process is a
// world of one. `recipe run --gpus N` sets the torchrun names and levers' own
// for the ranks it starts. An empty value counts as unset, but for
// CUDA_VISIBLE_DEVICES (empty, it hides every GPU, as in CUDA).
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace levers::env {

struct Variable {
    std::string_view name, meaning;
};

struct Section {
    std::string_view title;
    std::span<const Variable> variables;
};

inline constexpr Variable kTorchrun[] = {
    {"RANK", "this process's rank, 0 .. WORLD_SIZE-1"},
    {"WORLD_SIZE", "the number of ranks in the job"},
    {"LOCAL_RANK", "the rank among this node's processes; it picks the GPU (default RANK)"},
    {"LOCAL_WORLD_SIZE", "the number of ranks on this node (default WORLD_SIZE)"},
    {"MASTER_ADDR", "the host of rank 0's rendezvous store (jobs started by other launchers)"},
    {"MASTER_PORT", "its port; levers' store listens one above it when the agent holds it"},
    {"TORCHELASTIC_USE_AGENT_STORE", "True: torchrun's agent serves MASTER_PORT itself"},
};

inline constexpr Variable kOtherLaunchers[] = {
    {"OMPI_COMM_WORLD_RANK", "Open MPI's rank (mpirun)"},
    {"OMPI_COMM_WORLD_SIZE", "Open MPI's number of ranks"},
    {"OMPI_COMM_WORLD_LOCAL_RANK", "Open MPI's rank on this node"},
    {"OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI's number of ranks on this node"},
    {"SLURM_PROCID", "Slurm's rank (srun)"},
    {"SLURM_NTASKS", "Slurm's number of tasks"},
    {"SLURM_LOCALID", "Slurm's task index on this node"},
    {"SLURM_NTASKS_PER_NODE", "Slurm's tasks per node (set only with --ntasks-per-node)"},
    {"SLURM_STEP_TASKS_PER_NODE", "Slurm's tasks of the step on each node, e.g. 2(x3),1: this node's is the "
                                  "local world without the above"},
    {"SLURM_TASKS_PER_NODE", "the same for the job, where the step's is absent"},
    {"SLURM_NODEID", "Slurm's index of this node in the job, to read the lists above"},
};

inline constexpr Variable kLeversJob[] = {
    {"LEVERS_SEGMENT", "the job's shared-memory segment; set, the process is a rank of levers' launcher"},
    {"LEVERS_JOB_ID", "the job's id, for logs and the slot ledger"},
    {"LEVERS_DEVICE", "where the rank computes: cpu or cuda"},
    {"LEVERS_THREADS", "CPU threads of the rank"},
    {"LEVERS_TIMEOUT_MS", "how long a rank waits in a collective before naming the ranks it waits for"},
    {"LEVERS_LIVE_PROGRESS", "1: rank 0 sends its progress line for the launcher to redraw in place"},
    {"LEVERS_RUN_DIR", "the job's run directory (config, logs, metrics, checkpoints, result)"},
    {"LEVERS_RESUME", "the checkpoint every rank resumes from (recipe run --resume)"},
    {"LEVERS_MICRO_BATCH", "--set micro_batch=auto: the micro-batch the launcher's plan chose, for every rank"},
    {"LEVERS_GRAD_ACCUM", "--set micro_batch=auto: the gradient accumulation that keeps the samples per step"},
    {"LEVERS_GPUS", "GPUs a sweep gave this job, e.g. 0,1 (it takes them without queueing)"},
    {"LEVERS_JOB_TOKEN", "jobs of other launchers: a secret every rank shares; the store refuses other jobs"},
    {"LEVERS_STORE_PORT", "jobs of other launchers: the port of levers' rendezvous store"},
};

inline constexpr Variable kNodes[] = {
    {"GLOO_SOCKET_IFNAME", "CPU ranks across nodes: the network interface Gloo uses (default: the one on the "
                           "route to MASTER_ADDR)"},
    {"LEVERS_NODE_ALLREDUCE", "CPU ranks across nodes: hierarchical (default; shared memory within a node, Gloo "
                              "between one leader per node) or flat (Gloo among every rank)"},
};

inline constexpr Variable kSlurm[] = {
    {"PATH", "where recipe submit finds sbatch, and recipe status squeue (searched as the shell does)"},
};

inline constexpr Variable kGpus[] = {
    {"CUDA_VISIBLE_DEVICES", "the GPUs levers may use, as CUDA reads it (empty: none)"},
    {"LEVERS_CUDA_BACKEND", "the GPU backend library to open instead of liblevers_cuda.so beside liblevers"},
    {"NCCL_P2P_DISABLE", "yours wins over the GPU quirk that sets it (RTX PRO 6000 GPUs)"},
    {"LEVERS_FUSED_ATTENTION", "0: attention without the fused kernel, where one applies"},
};

inline constexpr Variable kWorkspace[] = {
    {"LEVERS_LEDGER_DIR", "the slot ledger's lock files (default /run/lock/levers-gpus, else /tmp/levers-gpus)"},
    {"LEVERS_CPU_SLOTS", "CPU slots without CUDA (default: the cores this process may use)"},
    {"LEVERS_MULTI_GPU", "on or off: whether jobs of several GPUs may run (over the workspace file)"},
    {"LEVERS_MAX_GPUS", "the most GPUs a job may ask for (over the workspace file)"},
    {"XDG_CONFIG_HOME", "where workspace.json is kept: $XDG_CONFIG_HOME/levers (default ~/.config/levers)"},
    {"HOME", "the default of the XDG folders"},
};

inline constexpr Variable kData[] = {
    {"LEVERS_DATA", "the fetched data: books, GPT-2's tokenizer (default $XDG_DATA_HOME/levers)"},
    {"XDG_DATA_HOME", "the default of LEVERS_DATA's parent (default ~/.local/share)"},
    {"LEVERS_CACHE", "derived data: decompressed images, tokenised corpora (default $XDG_CACHE_HOME/levers)"},
    {"XDG_CACHE_HOME", "the default of LEVERS_CACHE's parent (default ~/.cache)"},
    {"LEVERS_FASHION_MNIST", "the folder of Fashion-MNIST's IDX files (default: Debian's package)"},
};

inline constexpr Section kSections[] = {
    {"Ranks, torchrun's names", kTorchrun},
    {"Ranks, Open MPI's and Slurm's names (read when torchrun's are absent)", kOtherLaunchers},
    {"levers' launcher and its ranks", kLeversJob},
    {"Between nodes", kNodes},
    {"Slurm", kSlurm},
    {"GPUs", kGpus},
    {"The workspace and the slot ledger", kWorkspace},
    {"Data", kData},
};

// The value of a declared variable, or nullptr when it is unset or empty.
// Throws levers::Error for a name the table does not declare.
const char* get(std::string_view name);
// The same, with an empty value kept: CUDA_VISIBLE_DEVICES= hides every GPU.
const char* get_even_empty(std::string_view name);

// The manual: every section and variable, as `recipe help env` prints it.
std::string manual();

}  // namespace levers::env
