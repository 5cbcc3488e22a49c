// LEVERS_CUDA_CHECK(call): throws levers::Error naming the call, CUDA's error
// and this process's rank when a CUDA runtime call fails. CUDA builds only.
// (No fmt here: .cu files include it, and nvcc cannot compile fmt 9.)
#pragma once

#include <cuda_runtime.h>

namespace levers::detail {
[[noreturn]] void cuda_failed(const char* call, cudaError_t status, const char* file, int line);
}  // namespace levers::detail

#define LEVERS_CUDA_CHECK(call)                                                                   \
    do {                                                                                          \
        const cudaError_t levers_cuda_status = (call);                                            \
        if (levers_cuda_status != cudaSuccess)                                                    \
            ::levers::detail::cuda_failed(#call, levers_cuda_status, __FILE__, __LINE__);         \
    } while (0)
