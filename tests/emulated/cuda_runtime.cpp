// The CUDA runtime calls levers makes, on the emulated GPU: GPUs of
// compute capability 9.0 (one, or LEVERS_EMULATED_GPUS), device memory
// from the host heap (LEVERS_EMULATED_GPU_MEMORY bytes each, default 80 GiB), copies and fills queued on streams (streams.cpp).
#include "emulated_gpu.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace {
thread_local int current_device = 0;

// Where cudaMalloc's blocks are, to tell GPU from host memory in a copy of
// kind cudaMemcpyDefault.
std::mutex allocations_mutex;
std::map<const char*, std::size_t> allocations;
std::size_t allocated = 0;  // the sum of `allocations`

// Each GPU's memory: LEVERS_EMULATED_GPU_MEMORY bytes (default 80 GiB);
// cudaMalloc past it fails as a full GPU's does.
std::size_t gpu_memory() {
    static const std::size_t bytes = [] {
        const char* v = std::getenv("LEVERS_EMULATED_GPU_MEMORY");
        return v && *v ? static_cast<std::size_t>(std::strtoull(v, nullptr, 10)) : std::size_t{80} << 30;
    }();
    return bytes;
}

bool on_gpu(const void* p) {
    const auto* c = static_cast<const char*>(p);
    std::lock_guard lock(allocations_mutex);
    auto it = allocations.upper_bound(c);
    return it != allocations.begin() && c < std::prev(it)->first + std::max<std::size_t>(std::prev(it)->second, 1);
}

void release(void* p) {
    {
        std::lock_guard lock(allocations_mutex);
        const auto it = allocations.find(static_cast<const char*>(p));
        if (it != allocations.end()) {
            allocated -= it->second;
            allocations.erase(it);
        }
    }
    std::free(p);
}

// The GPUs this process has: LEVERS_EMULATED_GPUS of them (default one),
// of which CUDA_VISIBLE_DEVICES shows the indices it lists, up to the first
// that is not one (as CUDA reads it).
int visible_gpus() {
    const char* n = std::getenv("LEVERS_EMULATED_GPUS");
    const int gpus = n && *n ? std::atoi(n) : 1;
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    if (!visible) return gpus;
    int count = 0;
    for (const char* p = visible;; ++p) {
        char* end = nullptr;
        const long index = std::strtol(p, &end, 10);
        if (end == p || index < 0 || index >= gpus) break;
        ++count;
        if (*end != ',') break;
        p = end;
    }
    return count;
}
}  // namespace

extern "C" {

cudaError_t cudaGetLastError() {
    const cudaError_t e = levers::emulation::launch_error;
    levers::emulation::launch_error = cudaSuccess;
    return e;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "refused by the emulated GPU"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulatedGpu"; }

cudaError_t cudaGetDeviceCount(int* count) {
    *count = visible_gpus();
    return *count > 0 ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= visible_gpus()) return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
    *device = current_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (device < 0 || device >= visible_gpus()) return cudaErrorInvalidDevice;
    std::memset(p, 0, sizeof *p);
    std::strcpy(p->name, "levers emulated GPU (host threads)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->totalGlobalMem = gpu_memory();
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
    std::lock_guard lock(allocations_mutex);
    *total_bytes = gpu_memory();
    *free_bytes = gpu_memory() - std::min(allocated, gpu_memory());
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
    levers::emulation::finish_all();
    return cudaSuccess;
}

// Filled with 0xff (NaN in every float type): a kernel that reads memory
// nobody wrote shows it in its results, as it may on a GPU.
cudaError_t cudaMalloc(void** p, std::size_t bytes) {
    *p = nullptr;
    {
        std::lock_guard lock(allocations_mutex);
        if (allocated + bytes > gpu_memory()) return cudaErrorMemoryAllocation;
    }
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!*p) return cudaErrorMemoryAllocation;
    levers::emulation::count_malloc(bytes);
    std::memset(*p, 0xff, bytes);
    std::lock_guard lock(allocations_mutex);
    allocations[static_cast<const char*>(*p)] = bytes;
    allocated += bytes;
    return cudaSuccess;
}
// As on a GPU, freeing waits for the work queued so far (some may use it).
cudaError_t cudaFree(void* p) {
    levers::emulation::finish_all();
    release(p);
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
// Freed when the stream gets there: work on another stream that still uses
// it, unordered, reads freed memory (AddressSanitizer says so).
cudaError_t cudaFreeAsync(void* p, cudaStream_t s) {
    levers::emulation::enqueue(s, [p] { release(p); });
    return cudaSuccess;
}

// Copies on a stream. From host memory the bytes are taken at the call (a
// GPU stages pageable memory before returning); into host memory the call
// returns when the copy is done, so it waits for the stream's earlier work.
cudaError_t cudaMemcpyAsync(void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t s) {
    if (bytes == 0) return cudaSuccess;
    levers::emulation::count_copy();
    const bool from_host = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyHostToHost ||
                           (kind == cudaMemcpyDefault && !on_gpu(from));
    const bool to_host = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyHostToHost ||
                         (kind == cudaMemcpyDefault && !on_gpu(to));
    if (from_host) {
        auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(from),
                                                                   static_cast<const unsigned char*>(from) + bytes);
        levers::emulation::enqueue(s, [to, staged] { std::memcpy(to, staged->data(), staged->size()); });
    } else {
        levers::emulation::enqueue(s, [to, from, bytes] { std::memmove(to, from, bytes); });
    }
    if (to_host) levers::emulation::finish(s);
    return cudaSuccess;
}
// On the legacy default stream, and done when it returns.
cudaError_t cudaMemcpy(void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind) {
    cudaMemcpyAsync(to, from, bytes, kind, nullptr);
    levers::emulation::finish(nullptr);
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t s) {
    levers::emulation::count_memset();
    levers::emulation::enqueue(s, [p, value, bytes] { std::memset(p, value, bytes); });
    return cudaSuccess;
}

}  // extern "C"
