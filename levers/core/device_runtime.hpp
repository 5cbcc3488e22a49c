// The GPU backend, seen from the rest of levers: a shared library
// (liblevers_cuda.so, beside liblevers) opened the first time a GPU is
// used, so CPU work never maps the CUDA runtime, cuBLAS or NCCL. It
// registers its kernels as it loads (levers/core/kernel.hpp) and offers
// this interface for memory, copies and the GPU's stream.
//
// Where it is looked for: LEVERS_CUDA_BACKEND (a path; the emulated GPU of
// the tests is one), else liblevers_cuda.so in liblevers' own directory. A
// build without nvcc has none, and every GPU request says so.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace levers {

class DeviceRuntime {
public:
    virtual ~DeviceRuntime() = default;
    // GPUs this process may use (CUDA_VISIBLE_DEVICES applies); 0 where the
    // runtime reports no driver or no device.
    virtual int count() = 0;
    virtual std::vector<std::string> names() = 0;
    // Makes GPU `index` current for this process (before any other GPU call).
    virtual void set_current(int index) = 0;
    // GPU memory on the current GPU, or null when it is full.
    virtual void* allocate(std::size_t bytes) = 0;
    virtual void release(void* p) = 0;
    virtual void memory_info(std::size_t& free_bytes, std::size_t& total_bytes) = 0;
    // The process's compute stream on the current GPU (a cudaStream_t).
    virtual void* stream() = 0;
    // Any direction (host or GPU on either side); returns when done.
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    // Queued on the compute stream.
    virtual void zero(void* dst, std::size_t bytes) = 0;
    // Waits for everything queued on the compute stream.
    virtual void synchronize() = 0;
};

// Whether this build has a GPU backend library to load.
bool device_backend_installed();
// Opens the backend on first call (thread-safe); null where there is none or
// it does not load; device_backend_error() then says why ("" when it loaded).
DeviceRuntime* device_runtime();
const std::string& device_backend_error();
// Opens it if not yet open (kernels register as it loads); no-op without one.
void load_device_backend();
// A symbol the backend exports for the layers above core (NCCL's process
// group), or null.
void* device_backend_symbol(const char* name);

}  // namespace levers

// What a backend library exports (extern "C", so dlsym finds it by name).
extern "C" levers::DeviceRuntime* levers_device_runtime();
