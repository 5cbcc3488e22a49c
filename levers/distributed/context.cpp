#include "levers/distributed/context.hpp"

#include "levers/core/error.hpp"

#include <algorithm>
#include <cstring>

namespace levers::dist {

namespace {
struct Context {
    Placement placement;
    std::unique_ptr<Backend> backend;
    std::unique_ptr<Backend> device_backend;  // declared last: torn down first
};
Context& context() {
    static Context c;
    return c;
}
}  // namespace

void join(Placement placement, std::unique_ptr<Backend> backend, std::unique_ptr<Backend> device_backend) {
    LEVERS_CHECK(placement.world_size == 1 || (backend && backend->world_size() == placement.world_size),
                 "a world of {} ranks needs a process group of that size", placement.world_size);
    LEVERS_CHECK(!device_backend || device_backend->world_size() == placement.world_size,
                 "a world of {} ranks needs a GPU group of that size", placement.world_size);
    context() = Context{placement, std::move(backend), std::move(device_backend)};
}

void leave() {
    context().device_backend.reset();
    context() = Context{};
}

int rank() { return context().placement.rank; }
int world_size() { return context().placement.world_size; }
int local_rank() { return context().placement.local_rank; }
int local_world_size() { return context().placement.local_world_size; }
bool is_main() { return rank() == 0; }
Backend* backend() { return context().backend.get(); }
Backend* device_backend() { return context().device_backend.get(); }

Device device() { return context().placement.device; }

std::int64_t per_rank_batch(std::int64_t batch, std::int64_t global_batch) {
    if (global_batch <= 0) {
        LEVERS_CHECK(batch >= 1, "batch_size must be >= 1, got {}", batch);
        return batch;
    }
    LEVERS_CHECK(global_batch % world_size() == 0, "global_batch {} does not split evenly over {} ranks; use a multiple "
                 "of {}", global_batch, world_size(), world_size());
    return global_batch / world_size();
}

void barrier() {
    if (auto* b = backend()) b->barrier();
}

double all_reduce_mean(double value) {
    if (auto* b = backend()) b->all_reduce(&value, 1, ReduceOp::mean);
    return value;
}

void all_reduce_sum(std::vector<double>& values) {
    if (auto* b = backend()) b->all_reduce(values.data(), static_cast<std::int64_t>(values.size()), ReduceOp::sum);
}

std::vector<std::string> all_gather_text(const std::string& text) {
    Backend* group = backend();
    if (!group) return {text};
    // Lengths first, then every text padded to the longest, moved as raw 8-byte words.
    std::vector<double> lengths(static_cast<std::size_t>(world_size()), 0.0);
    lengths[static_cast<std::size_t>(rank())] = static_cast<double>(text.size());
    all_reduce_sum(lengths);
    const auto longest = static_cast<std::size_t>(*std::max_element(lengths.begin(), lengths.end()));
    const std::size_t words = (longest + 7) / 8;
    std::vector<double> mine(std::max<std::size_t>(words, 1), 0.0), all(mine.size() * lengths.size());
    std::memcpy(mine.data(), text.data(), text.size());
    group->all_gather(all.data(), mine.data(), static_cast<std::int64_t>(mine.size()));
    std::vector<std::string> out;
    for (std::size_t r = 0; r < lengths.size(); ++r)
        out.emplace_back(reinterpret_cast<const char*>(all.data() + r * mine.size()),
                         static_cast<std::size_t>(lengths[r]));
    return out;
}

void broadcast(void* data, std::size_t bytes) {
    if (auto* b = backend()) b->broadcast(data, bytes, 0);
}

}  // namespace levers::dist
