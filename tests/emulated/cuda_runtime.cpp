// The CUDA runtime calls levers makes, on the emulated card: one card
// (compute capability 9.0), device memory from the host heap, and streams
// and events that are only names, since every launch and copy completes
// before its call returns.
#include "emulated_card.hpp"

#include <cstdlib>
#include <cstring>

namespace {
thread_local int current_device = 0;
using levers::emulation::drop_handle;
using levers::emulation::make_handle;
}  // namespace

extern "C" {

cudaError_t cudaGetLastError() {
    const cudaError_t e = levers::emulation::launch_error;
    levers::emulation::launch_error = cudaSuccess;
    return e;
}
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "refused by the emulated card"; }
const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulatedCard"; }

cudaError_t cudaGetDeviceCount(int* count) {
    *count = 1;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
    *device = current_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
    if (device != 0) return cudaErrorInvalidDevice;
    std::memset(p, 0, sizeof *p);
    std::strcpy(p->name, "levers emulated card (host threads)");
    p->major = 9;
    p->minor = 0;
    p->multiProcessorCount = 132;
    p->totalGlobalMem = 80ull << 30;
    p->sharedMemPerBlock = 48 << 10;
    p->sharedMemPerBlockOptin = 227 << 10;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
    *free_bytes = 64ull << 30;
    *total_bytes = 80ull << 30;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }

// Filled with 0xff (NaN in every float type): a kernel that reads memory
// nobody wrote shows it in its results, as it may on a card.
cudaError_t cudaMalloc(void** p, std::size_t bytes) {
    *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256);
    if (!*p) return cudaErrorMemoryAllocation;
    std::memset(*p, 0xff, bytes);
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    std::free(p);
    return cudaSuccess;
}
cudaError_t cudaMallocAsync(void** p, std::size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
cudaError_t cudaMemcpy(void* to, const void* from, std::size_t bytes, cudaMemcpyKind) {
    if (bytes) std::memmove(to, from, bytes);
    return cudaSuccess;
}
cudaError_t cudaMemcpyAsync(void* to, const void* from, std::size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(to, from, bytes, kind);
}
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t) {
    std::memset(p, value, bytes);
    return cudaSuccess;
}

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
    *s = make_handle<cudaStream_t>();
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    drop_handle(s);
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned) { return cudaSuccess; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    *e = make_handle<cudaEvent_t>();
    return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    drop_handle(e);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }

}  // extern "C"
