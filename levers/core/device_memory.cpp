#include "levers/core/device_memory.hpp"

#include "levers/core/device_runtime.hpp"
#include "levers/core/error.hpp"
#include "levers/core/out_of_memory.hpp"
#include "levers/core/shape_trace.hpp"

#include <cstring>

namespace levers {

namespace {

DeviceRuntime& runtime(const char* what) {
    DeviceRuntime* rt = device_runtime();
    LEVERS_CHECK(rt != nullptr, "{}: {}", what, device_backend_error());
    return *rt;
}

StoragePool& gpu_pool() {
    static StoragePool* pool = new StoragePool(  // never destroyed: blocks may be released during exit
        [](std::size_t bytes) { return runtime("GPU memory").allocate(bytes); },
        [](void* p, std::size_t) { runtime("GPU memory").release(p); },
        [] {
            std::size_t free_bytes = 0, total = 0;
            runtime("GPU memory").memory_info(free_bytes, total);
            return fmt::format(", {:.1f} of {:.1f} MiB free", free_bytes / 1048576.0, total / 1048576.0);
        },
        "the GPU", &tensor_memory(Device::Kind::cuda));
    return *pool;
}

}  // namespace

std::shared_ptr<std::byte> device_alloc(std::size_t bytes) {
    (void)runtime("GPU memory");
    return gpu_pool().take(bytes);
}

std::shared_ptr<std::byte> device_alloc_unpooled(std::size_t bytes) {
    DeviceRuntime& rt = runtime("GPU memory");
    void* p = rt.allocate(bytes);
    if (!p) {
        gpu_pool().release_cached();
        p = rt.allocate(bytes);
    }
    if (!p) {
        std::size_t free_bytes = 0, total = 0;
        rt.memory_info(free_bytes, total);
        throw OutOfMemory("the GPU", bytes,
                          fmt::format(", {:.1f} of {:.1f} MiB free", free_bytes / 1048576.0, total / 1048576.0));
    }
    DeviceRuntime* owner = &rt;
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [owner](std::byte* q) { owner->release(q); });
}

void* compute_stream() { return runtime("a CUDA stream").stream(); }

// Inside a shape trace nothing reaches the GPU (there may be none): the
// traced GPU's memory is host address space, so small copies (token ids,
// positions, targets: what host code reads back) are made there, larger ones
// (weights) not at all.
void device_copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    if (!shape_tracing()) return runtime("a copy to or from a GPU").copy(dst, src, bytes);
    if (bytes <= kTracedCopyBytes) std::memcpy(dst, src, bytes);
}

void device_zero(void* dst, std::size_t bytes) {
    if (bytes > 0 && !shape_tracing()) runtime("zeroing GPU memory").zero(dst, bytes);
}

void device_synchronize() {
    if (!shape_tracing()) runtime("waiting for a GPU").synchronize();
}

MemoryStats device_memory_stats() { return device_runtime() ? gpu_pool().stats() : MemoryStats{}; }

void reset_device_memory_peak() {
    if (device_runtime()) gpu_pool().reset_peak();
}

void release_cached_device_memory() {
    if (!device_runtime()) return;
    device_synchronize();
    gpu_pool().release_cached();
}

}  // namespace levers
