#include "levers/launch/env_contract.hpp"

#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/core/split.hpp"

#include <algorithm>
#include <charconv>
#include <string>
#include <cstdlib>

namespace levers::launch {

namespace {

const char* get(const char* name) { return env::get(name); }

long parse_number(const char* name, const char* text, long min) {
    long value = 0;
    std::string_view s(text);
    auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
    LEVERS_CHECK(ec == std::errc{} && end == s.data() + s.size() && value >= min,
                 "environment variable {}='{}' must be an integer >= {}", name, text, min);
    return value;
}

// Reads rank/world/local names of one launcher family; false if its RANK-like variable is absent.
bool read_family(RankEnv& env, const char* rank, const char* world, const char* local_rank, const char* local_world) {
    if (!get(rank)) return false;
    LEVERS_CHECK(get(world) != nullptr, "{} is set but {} is not", rank, world);
    env.rank = static_cast<int>(parse_number(rank, get(rank), 0));
    env.world_size = static_cast<int>(parse_number(world, get(world), 1));
    env.local_rank = get(local_rank) ? static_cast<int>(parse_number(local_rank, get(local_rank), 0)) : env.rank;
    env.local_world_size =
        get(local_world) ? static_cast<int>(parse_number(local_world, get(local_world), 1)) : env.world_size;
    LEVERS_CHECK(env.rank < env.world_size, "{}={} must be below {}={}", rank, env.rank, world, env.world_size);
    LEVERS_CHECK(env.local_rank < env.local_world_size, "{}={} must be below {}={}", local_rank, env.local_rank,
                 local_world, env.local_world_size);
    return true;
}

// Slurm says how many tasks each node runs as "2(x3),1" (three nodes of 2,
// then one of 1): the count of node `node`, or 0 if the list does not say.
int tasks_on_node(const char* name, const std::string& list, int node) {
    if (list.empty()) return 0;
    int first = 0;
    for (const auto& item : split(list)) {
        const std::size_t paren = item.find("(x");
        const long count = parse_number(name, item.substr(0, paren).c_str(), 1);
        const std::string times = paren == std::string::npos ? "1" : item.substr(paren + 2, item.size() - paren - 3);
        const long repeat = parse_number(name, times.c_str(), 1);
        if (node < first + repeat) return static_cast<int>(count);
        first += static_cast<int>(repeat);
    }
    return 0;
}

// Slurm sets SLURM_NTASKS_PER_NODE only when asked for (--ntasks-per-node);
// otherwise the step's tasks on this node come from its per-node list.
void read_slurm_local_world(RankEnv& env) {
    if (get("SLURM_NTASKS_PER_NODE")) return;
    const char* list = get("SLURM_STEP_TASKS_PER_NODE") ? "SLURM_STEP_TASKS_PER_NODE" : "SLURM_TASKS_PER_NODE";
    const char* node = get("SLURM_NODEID");
    if (!get(list) || !node) return;
    if (const int n = tasks_on_node(list, get(list), static_cast<int>(parse_number("SLURM_NODEID", node, 0))); n > 0)
        env.local_world_size = n;
    LEVERS_CHECK(env.local_rank < env.local_world_size, "SLURM_LOCALID={} must be below {}'s {} for node {}",
                 env.local_rank, list, env.local_world_size, node);
}

}  // namespace

RankEnv read_rank_env() {
    RankEnv env;
    if (read_family(env, "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"))
        env.source = "torchrun";
    else if (read_family(env, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                         "OMPI_COMM_WORLD_LOCAL_SIZE"))
        env.source = "openmpi";
    else if (read_family(env, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE")) {
        env.source = "slurm";
        read_slurm_local_world(env);
    }
    if (const char* a = get("MASTER_ADDR")) env.master_addr = a;
    if (const char* p = get("MASTER_PORT")) env.master_port = static_cast<int>(parse_number("MASTER_PORT", p, 1));
    if (const char* s = get("LEVERS_SEGMENT")) {
        env.segment = s;
        env.source = "levers";
    }
    if (const char* j = get("LEVERS_JOB_ID")) env.job_id = j;
    if (const char* d = get("LEVERS_DEVICE")) {
        const auto kind = kind_named(d);
        LEVERS_CHECK(kind, "LEVERS_DEVICE='{}' must be cpu or cuda", d);
        env.device = *kind;
    }
    if (const char* t = get("LEVERS_THREADS")) env.threads = static_cast<int>(parse_number("LEVERS_THREADS", t, 1));
    if (const char* t = get("LEVERS_TIMEOUT_MS")) env.timeout_ms = parse_number("LEVERS_TIMEOUT_MS", t, 1);
    return env;
}

}  // namespace levers::launch
