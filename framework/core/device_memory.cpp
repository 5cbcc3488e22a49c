#include "framework/core/device_memory.hpp"

#include "framework/core/error.hpp"

#if defined(LEVERS_CUDA)
#include "framework/core/cuda_check.hpp"

#include <algorithm>
#include <map>
#include <mutex>
#include <vector>
#endif

namespace levers {

#if defined(LEVERS_CUDA)

namespace {

// Sizes round up to 512 bytes below 1 MiB and to 2 MiB above, so blocks of
// nearly equal sizes (batch shapes differing a little) share a free list.
std::size_t rounded(std::size_t bytes) {
    const std::size_t unit = bytes < (std::size_t{1} << 20) ? 512 : std::size_t{2} << 20;
    return std::max(unit, (bytes + unit - 1) / unit * unit);
}

struct Cache {
    std::mutex mutex;
    std::map<std::size_t, std::vector<void*>> free;  // by rounded size
    DeviceMemoryStats stats;
};

Cache& cache() {
    static Cache* c = new Cache;  // never destroyed: blocks may be released during exit
    return *c;
}

}  // namespace

std::shared_ptr<std::byte> device_alloc(std::size_t bytes) {
    const std::size_t size = rounded(bytes);
    Cache& c = cache();
    void* p = nullptr;
    {
        std::lock_guard lock(c.mutex);
        auto& list = c.free[size];
        if (!list.empty()) {
            p = list.back();
            list.pop_back();
            c.stats.cached -= size;
        }
    }
    if (!p) {
        cudaError_t status = cudaMalloc(&p, size);
        if (status == cudaErrorMemoryAllocation) {  // give the cache back and try once more
            (void)cudaGetLastError();
            release_cached_device_memory();
            status = cudaMalloc(&p, size);
        }
        if (status == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            std::size_t free_bytes = 0, total = 0;
            cudaMemGetInfo(&free_bytes, &total);
            int card = -1;
            cudaGetDevice(&card);
            LEVERS_FAIL("out of memory on card {}: {:.1f} MiB asked for, {:.1f} of {:.1f} MiB free (a smaller "
                        "batch_size would fit)", card, size / 1048576.0, free_bytes / 1048576.0, total / 1048576.0);
        }
        if (status != cudaSuccess) detail::cuda_failed("cudaMalloc", status, __FILE__, __LINE__);
    }
    {
        std::lock_guard lock(c.mutex);
        c.stats.in_use += size;
    }
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [size](std::byte* q) {
        // Work queued on the compute stream may still use the block: the next
        // user queues on the same stream, after it.
        Cache& c = cache();
        std::lock_guard lock(c.mutex);
        c.free[size].push_back(q);
        c.stats.in_use -= size;
        c.stats.cached += size;
    });
}

void* compute_stream() {
    static cudaStream_t stream = [] {
        cudaStream_t s = nullptr;
        LEVERS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        return s;
    }();
    return stream;
}

void device_copy(void* dst, const void* src, std::size_t bytes) {
    if (bytes == 0) return;
    const auto s = static_cast<cudaStream_t>(compute_stream());
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
    LEVERS_CUDA_CHECK(cudaStreamSynchronize(s));
}

void device_zero(void* dst, std::size_t bytes) {
    if (bytes > 0) LEVERS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(compute_stream())));
}

DeviceMemoryStats device_memory_stats() {
    std::lock_guard lock(cache().mutex);
    return cache().stats;
}

void release_cached_device_memory() {
    Cache& c = cache();
    std::lock_guard lock(c.mutex);
    if (c.stats.cached > 0) cudaStreamSynchronize(static_cast<cudaStream_t>(compute_stream()));
    for (auto& [size, list] : c.free)
        for (void* p : list) cudaFree(p);
    c.free.clear();
    c.stats.cached = 0;
}

#else

namespace {
[[noreturn]] void no_cuda(const char* what) {
    LEVERS_FAIL("{}: this build of levers has no CUDA backend (nvcc was not found when it was configured)", what);
}
}  // namespace

std::shared_ptr<std::byte> device_alloc(std::size_t) { no_cuda("card memory"); }
void* compute_stream() { no_cuda("a CUDA stream"); }
void device_copy(void*, const void*, std::size_t) { no_cuda("a copy to or from a card"); }
void device_zero(void*, std::size_t) { no_cuda("zeroing card memory"); }
DeviceMemoryStats device_memory_stats() { return {}; }
void release_cached_device_memory() {}

#endif

}  // namespace levers
