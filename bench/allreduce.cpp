// All-reduce throughput of levers' shared-memory backend between 2 (or N)
// processes on this node, beside a single-process memcpy of the same bytes.
// bench/allreduce.sh runs it next to Open MPI's MPI_Allreduce.
#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/shm_segment.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {
using Clock = std::chrono::steady_clock;

// Median seconds of `fn` over `reps` runs (a count every rank agrees on:
// collectives must be called the same number of times everywhere).
template <class F> double median_seconds(int reps, F&& fn) {
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
        const auto a = Clock::now();
        fn();
        t.push_back(std::chrono::duration<double>(Clock::now() - a).count());
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
    CLI::App app("levers shared-memory all-reduce (f32 sum) against memcpy", "bench_allreduce");
    int ranks = 2;
    std::size_t slot_mb = 2;
    app.add_option("--ranks", ranks, "processes")->check(CLI::Range(1, 64));
    app.add_option("--slot-mb", slot_mb, "per-rank staging slot in MiB (the launcher's default is 2)");
    CLI11_PARSE(app, argc, argv);

    std::vector<std::size_t> sizes;
    for (std::size_t b = 1024; b <= (std::size_t{256} << 20); b *= 4) sizes.push_back(b);
    const std::size_t slot = slot_mb << 20;
    const std::size_t bytes = levers::dist::ShmBackend::segment_bytes(ranks, slot);
    auto segment = levers::dist::ShmSegment::create(levers::dist::ShmSegment::unique_name(), bytes);
    levers::dist::ShmBackend::initialize(segment.data(), bytes, ranks, slot);
    std::vector<pid_t> children;
    int rank = 0;
    for (int r = 1; r < ranks; ++r) {
        pid_t pid = fork();
        if (pid == 0) {
            rank = r;
            break;
        }
        children.push_back(pid);
    }
    levers::dist::ShmBackend group(segment.data(), bytes, rank, std::chrono::seconds(60));
    if (rank == 0) fmt::print("{{\"impl\": \"levers-shm\", \"ranks\": {}, \"rows\": [", ranks);
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::size_t n = sizes[i] / sizeof(float);
        std::vector<float> data(n, 1.0f), copy(n);
        const int reps = static_cast<int>(std::clamp<std::size_t>((std::size_t{256} << 20) / sizes[i], 7, 301));
        group.all_reduce(data.data(), static_cast<std::int64_t>(n), levers::dist::ReduceOp::sum);  // warm-up
        const double reduce = median_seconds(reps, [&] {
            group.all_reduce(data.data(), static_cast<std::int64_t>(n), levers::dist::ReduceOp::sum);
        });
        group.barrier();
        double memcpy_s = 0;
        if (rank == 0) memcpy_s = median_seconds(reps, [&] { std::memcpy(copy.data(), data.data(), sizes[i]); });
        if (rank == 0)
            fmt::print("{}{{\"bytes\": {}, \"levers_s\": {:.9f}, \"memcpy_s\": {:.9f}}}", i ? ", " : "", sizes[i],
                       reduce, memcpy_s);
    }
    if (rank != 0) _exit(0);
    fmt::print("]}}\n");
    for (pid_t c : children) waitpid(c, nullptr, 0);
    return 0;
}
