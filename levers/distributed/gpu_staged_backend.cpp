#include "levers/distributed/gpu_staged_backend.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/error.hpp"

#include <algorithm>

namespace levers::dist {

namespace {
std::size_t bytes_of(std::int64_t n, DType dtype) {
    LEVERS_CHECK(n >= 0, "a collective of {} elements", n);
    return static_cast<std::size_t>(n) * size_of(dtype);
}
}  // namespace

GpuStagedBackend::GpuStagedBackend(Backend& gpus) : gpus_(gpus) {
    LEVERS_CHECK(gpus.queues_on_gpu(), "host collectives staged through the GPU need a GPU group, not {}",
                 gpus.name());
}

std::byte* GpuStagedBackend::stage(std::size_t bytes) {
    if (bytes > capacity_) {
        buffer_ = device_alloc(bytes);
        capacity_ = bytes;
    }
    return buffer_.get();
}

void GpuStagedBackend::all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) {
    const std::size_t bytes = bytes_of(n, dtype);
    std::byte* gpu = stage(std::max<std::size_t>(bytes, 1));  // an empty one is still collective
    if (bytes > 0) device_copy(gpu, data, bytes);
    gpus_.all_reduce(gpu, n, dtype, op);
    if (bytes > 0) device_copy(data, gpu, bytes);
}

void GpuStagedBackend::broadcast(void* data, std::size_t bytes, int root) {
    std::byte* gpu = stage(std::max<std::size_t>(bytes, 1));
    if (bytes > 0) device_copy(gpu, data, bytes);
    gpus_.broadcast(gpu, bytes, root);
    if (bytes > 0) device_copy(data, gpu, bytes);
}

void GpuStagedBackend::all_gather(void* out, const void* in, std::int64_t n, DType dtype) {
    const std::size_t bytes = bytes_of(n, dtype), all = bytes * static_cast<std::size_t>(world_size());
    std::byte* gpu = stage(std::max<std::size_t>(bytes + all, 1));
    if (bytes > 0) device_copy(gpu, in, bytes);
    gpus_.all_gather(gpu + bytes, gpu, n, dtype);
    if (all > 0) device_copy(out, gpu + bytes, all);
}

void GpuStagedBackend::reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) {
    const auto [begin, end] = chunk(n, world_size(), rank());
    const std::size_t bytes = bytes_of(n, dtype), mine = bytes_of(end - begin, dtype);
    std::byte* gpu = stage(std::max<std::size_t>(bytes + mine, 1));
    if (bytes > 0) device_copy(gpu, in, bytes);
    gpus_.reduce_scatter(gpu + bytes, gpu, n, dtype, op);
    if (mine > 0) device_copy(out, gpu + bytes, mine);
}

}  // namespace levers::dist
