// The rank helpers: what a per-rank function asks about its job. Before a
// group is joined (and always with one rank) every helper answers as a world
// of one, so the same code runs in place and under the launcher.
#pragma once

#include "levers/core/device.hpp"
#include "levers/distributed/backend.hpp"

#include <fmt/format.h>

#include <cstdint>
#include <cstdio>
#include <memory>
#include <utility>
#include <vector>

namespace levers::dist {

struct Placement {
    int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
    Device device = Device::cpu();  // where this rank computes
};

// Makes `backend` this process's group (the launcher's worker mode calls it
// once). `device_backend` carries collectives on GPU memory (NCCL) when the
// ranks compute on GPUs; host-side collectives (losses, metrics, text) stay
// on `backend`, as PyTorch keeps gloo beside NCCL.
void join(Placement placement, std::unique_ptr<Backend> backend, std::unique_ptr<Backend> device_backend = nullptr);
// Back to a world of one (tests).
void leave();

int rank();
int world_size();
int local_rank();
int local_world_size();
bool is_main();  // rank 0
// The group, or nullptr in a world of one.
Backend* backend();
// The group for buffers on this rank's GPU, or nullptr (CPU, or a world of one).
Backend* device_backend();

// Collective: every rank must call it.
void barrier();
// Collective: the mean of `value` over ranks, in double, identical everywhere.
double all_reduce_mean(double value);
// Collective: element-wise sums over ranks, in place.
void all_reduce_sum(std::vector<double>& values);
// Collective: copies rank 0's buffer into every rank's.
void broadcast(void* data, std::size_t bytes);
// Collective: every rank's text, in rank order (checkpoints' per-rank state).
std::vector<std::string> all_gather_text(const std::string& text);

// Where this rank computes: the CPU, or its GPU (--device, chosen at join).
Device device();

// The per-rank batch: `batch` as given, or, when `global_batch` > 0, that
// global batch split evenly over the ranks (so results do not change with the
// GPU count). Throws levers::Error if it does not split evenly.
std::int64_t per_rank_batch(std::int64_t batch, std::int64_t global_batch);

// This rank's contiguous share [begin, end) of `count` items: world nearly
// equal parts, every item once, whatever the rank count (an evaluation over
// a test set scores its share, then sums over ranks).
inline std::pair<std::int64_t, std::int64_t> share(std::int64_t count) {
    return Backend::chunk(count, world_size(), rank());
}

// This rank's contiguous share of `rows`, as share() cuts them.
template <class T> std::vector<T> shard(const std::vector<T>& rows) {
    auto [lo, hi] = share(static_cast<std::int64_t>(rows.size()));
    return std::vector<T>(rows.begin() + lo, rows.begin() + hi);
}

// Prints on rank 0 only.
template <class... Args> void print0(fmt::format_string<Args...> f, Args&&... args) {
    if (!is_main()) return;
    fmt::print(f, std::forward<Args>(args)...);
    std::fflush(stdout);
}

}  // namespace levers::dist
