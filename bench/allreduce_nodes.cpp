// All-reduce (f32 sum, in place) between the ranks of a job across nodes,
// joined as an external launcher's ranks are (torchrun's variables): Gloo
// between the nodes, hierarchical or flat (LEVERS_NODE_ALLREDUCE). Rank 0
// prints the median time per size, 1 KiB to 64 MiB, as JSON; the same sizes
// and repetition counts as allreduce_mpi.c. bench/allreduce_nodes.sh runs it.
#include "levers/launch/env_contract.hpp"
#include "levers/launch/rendezvous.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <vector>

int main() {
    using Clock = std::chrono::steady_clock;
    const auto env = levers::launch::read_rank_env();
    auto joined = levers::launch::join_external(env, std::chrono::seconds(60));
    auto& group = *joined.backend;
    if (env.rank == 0)
        fmt::print("{{\"impl\": \"levers: {}\", \"ranks\": {}, \"rows\": [", group.name(), env.world_size);
    bool first = true;
    for (std::size_t bytes = 1024; bytes <= (std::size_t{64} << 20); bytes *= 4) {
        const std::size_t n = bytes / sizeof(float);
        std::vector<float> data(n, 1.0f);
        const int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{256} << 20) / bytes, 7, 301));
        group.all_reduce(data.data(), static_cast<std::int64_t>(n), levers::dist::ReduceOp::sum);  // warm-up
        std::vector<double> t;
        for (int r = 0; r < reps; ++r) {
            const auto a = Clock::now();
            group.all_reduce(data.data(), static_cast<std::int64_t>(n), levers::dist::ReduceOp::sum);
            t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
        }
        std::sort(t.begin(), t.end());
        if (env.rank == 0)
            fmt::print("{}{{\"bytes\": {}, \"seconds\": {:.9f}}}", first ? "" : ", ", bytes, t[t.size() / 2]);
        first = false;
    }
    group.barrier();
    if (env.rank == 0) fmt::print("]}}\n");
    return 0;
}
