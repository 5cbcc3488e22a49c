// The GPU backend's face to the rest of levers (levers/core/device_runtime.hpp):
// the CUDA runtime behind one interface, exported as levers_device_runtime()
// for the loader. This library also holds every CUDA kernel (they register
// as it loads) and NCCL's process group.
#include "levers/core/device_runtime.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/error.hpp"
#include "levers/kernels/cuda/cuda_check.hpp"

#include <cuda_runtime.h>

#include <memory>
#include <vector>

namespace levers::kernels::cuda {

namespace {

class CudaRuntime final : public DeviceRuntime {
public:
    int count() override {
        int n = 0;
        // No driver (35), no device (100) or any other failure here: no usable GPU.
        if (cudaGetDeviceCount(&n) != cudaSuccess) {
            (void)cudaGetLastError();  // clear the sticky error for later calls
            return 0;
        }
        return n;
    }

    std::vector<std::string> names() override {
        std::vector<std::string> out;
        for (int i = 0, n = count(); i < n; ++i) {
            cudaDeviceProp prop{};
            LEVERS_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
            out.emplace_back(prop.name);
        }
        return out;
    }

    void set_current(int index) override { LEVERS_CUDA_CHECK(cudaSetDevice(index)); }

    void* allocate(std::size_t bytes) override {
        void* p = nullptr;
        const cudaError_t status = cudaMalloc(&p, bytes);
        if (status == cudaErrorMemoryAllocation) {
            (void)cudaGetLastError();
            return nullptr;
        }
        if (status != cudaSuccess) detail::cuda_failed("cudaMalloc", status, __FILE__, __LINE__);
        return p;
    }

    void release(void* p) override { cudaFree(p); }  // waits for the GPU first, as cudaFree does

    void memory_info(std::size_t& free_bytes, std::size_t& total_bytes) override {
        free_bytes = total_bytes = 0;
        cudaMemGetInfo(&free_bytes, &total_bytes);
    }

    void* stream() override {
        static cudaStream_t s = [] {
            cudaStream_t made = nullptr;
            LEVERS_CUDA_CHECK(cudaStreamCreateWithFlags(&made, cudaStreamNonBlocking));
            return made;
        }();
        return s;
    }

    void copy(void* dst, const void* src, std::size_t bytes) override {
        const auto s = static_cast<cudaStream_t>(stream());
        LEVERS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s));
        LEVERS_CUDA_CHECK(cudaStreamSynchronize(s));
    }

    void zero(void* dst, std::size_t bytes) override {
        LEVERS_CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, static_cast<cudaStream_t>(stream())));
    }

    void synchronize() override { LEVERS_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(stream()))); }
};

}  // namespace

// A library's workspace (cuBLASLt's) from levers' GPU allocator: a full GPU
// is an OutOfMemory naming the size, as for tensors, not a CUDA status. Kept
// as long as the calling thread.
void* workspace_memory(std::size_t bytes) {
    thread_local std::vector<std::shared_ptr<std::byte>> kept;
    kept.push_back(device_alloc_unpooled(bytes));
    return kept.back().get();
}

}  // namespace levers::kernels::cuda

extern "C" levers::DeviceRuntime* levers_device_runtime() {
    static levers::kernels::cuda::CudaRuntime runtime;
    return &runtime;
}
