#include "levers/core/error.hpp"
#include "levers/launch/env_contract.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

using namespace levers;

namespace {
// Sets the variables for its lifetime, and unsets them after.
struct Env {
    explicit Env(std::initializer_list<std::pair<const char*, const char*>> vars) : vars_(vars.begin(), vars.end()) {
        for (const auto& [k, v] : vars_) ::setenv(k.c_str(), v.c_str(), 1);
    }
    ~Env() {
        for (const auto& [k, v] : vars_) ::unsetenv(k.c_str());
    }
    std::vector<std::pair<std::string, std::string>> vars_;
};
}  // namespace

TEST_CASE("Slurm's ranks: the node's task count from the step's per-node list, as a real srun sets it") {
    // srun -N 3 -n 5 sets no SLURM_NTASKS_PER_NODE; its step list reads "2(x2),1".
    {
        Env e{{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "5"}, {"SLURM_LOCALID", "1"}, {"SLURM_NODEID", "1"},
              {"SLURM_STEP_TASKS_PER_NODE", "2(x2),1"}};
        const auto env = launch::read_rank_env();
        CHECK(env.source == "slurm");
        CHECK(env.rank == 3);
        CHECK(env.world_size == 5);
        CHECK(env.local_rank == 1);
        CHECK(env.local_world_size == 2);
    }
    {
        Env e{{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "5"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "2"},
              {"SLURM_TASKS_PER_NODE", "2(x2),1"}};
        CHECK(launch::read_rank_env().local_world_size == 1);
    }
    {  // --ntasks-per-node wins, and one node without any list is the whole world
        Env e{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "4"}, {"SLURM_LOCALID", "1"}, {"SLURM_NTASKS_PER_NODE", "2"},
              {"SLURM_NODEID", "0"}, {"SLURM_STEP_TASKS_PER_NODE", "4"}};
        CHECK(launch::read_rank_env().local_world_size == 2);
    }
    {
        Env e{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "1"}};
        CHECK(launch::read_rank_env().local_world_size == 2);
    }
    {
        Env e{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_LOCALID", "0"}, {"SLURM_NODEID", "0"},
              {"SLURM_STEP_TASKS_PER_NODE", "2(xq)"}};
        CHECK_THROWS_WITH_AS(launch::read_rank_env(), doctest::Contains("SLURM_STEP_TASKS_PER_NODE"), Error);
    }
}
