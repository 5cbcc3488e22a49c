// Launch latency: a user's own binary with the whole `recipe` command line
// (levers::main) and one recipe, `ready`, that meets in a barrier and reports
// when it got past it. bench/launch.sh times `bench_launch run ready --gpus N`
// against torchrun starting the same number of trivial workers.
#include "levers/distributed/context.hpp"
#include "levers/app/cli.hpp"
#include "levers/recipe/recipe.hpp"

#include <chrono>
#include <vector>

#include <sys/resource.h>

namespace {
levers::Result ready(const levers::Config&) {
    levers::dist::barrier();
    const auto now = std::chrono::system_clock::now().time_since_epoch();
    // Each rank's resident memory so far: a CPU rank that holds no tensors is the libraries it maps.
    std::vector<double> rss_mb(static_cast<std::size_t>(levers::dist::world_size()), 0.0);
    rusage usage{};
    ::getrusage(RUSAGE_SELF, &usage);
    rss_mb[static_cast<std::size_t>(levers::dist::rank())] = static_cast<double>(usage.ru_maxrss) / 1024.0;
    levers::dist::all_reduce_sum(rss_mb);
    return {{"ranks", levers::dist::world_size()},
            {"ready_unix_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()},
            {"rank_peak_rss_mb", rss_mb}};
}
}  // namespace

LEVERS_RECIPE(ready) {
    return levers::recipe("ready").describe("every rank meets in one barrier; returns when rank 0 passed it").run(ready);
}

int main(int argc, char** argv) { return levers::main(argc, argv); }
