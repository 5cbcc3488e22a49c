// `recipe submit`: hands a job to Slurm. Writes an sbatch script into a new
// run directory (the layout of `recipe run`'s) that runs the recipe on the
// allocation, one task per GPU (or per CPU rank), the rendezvous store at the
// allocation's first node, submits it, and prints the job id and the run
// directory. With --restarts K the script starts a failed job again from the
// run's newest checkpoint, up to K times, as `recipe run --restarts` does.
#pragma once

#include <string>
#include <vector>

namespace levers {

struct SubmitFlags {
    std::string name;
    std::vector<std::string> sets;
    int nodes = 1;
    int gpus = 0;  // per node; 0: the recipe's default
    std::string time;       // --time for sbatch, e.g. 1:00:00 (empty: the partition's)
    std::string partition;  // empty: the default partition
    std::string device = "auto";
    std::string out;  // the run directory (default: runs/NAME/<time>)
    int threads = 0;  // CPU threads per rank (0: the node's cores shared)
    int restarts = 0;
};

// Returns the exit code; throws levers::Error for bad input or a machine
// without Slurm (exit 2, nothing submitted).
int submit_recipe(const SubmitFlags& flags);

// The node's levers jobs in Slurm's queue ("" where Slurm is not installed).
std::string slurm_jobs();

}  // namespace levers
