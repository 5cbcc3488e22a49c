// LEVERS_CUDA_CHECK(call) and LEVERS_CUBLAS_CHECK(call): throw levers::Error
// naming the call, the error and this process's rank when a CUDA runtime or
// cuBLAS call fails; op_refused for a CUDA op given shapes it does not take.
// CUDA builds only.
// (No fmt here: .cu files include it, and nvcc cannot compile fmt 9.)
#pragma once

#include <cuda_runtime.h>

namespace levers::detail {
[[noreturn]] void cuda_failed(const char* call, cudaError_t status, const char* file, int line);
// cuBLAS statuses (an int here, so this header needs no cuBLAS include).
[[noreturn]] void cublas_failed(const char* call, int status, const char* file, int line);
// An op asked for what it cannot do (shapes it has no kernel for).
[[noreturn]] void op_refused(const char* what, const char* file, int line);
}  // namespace levers::detail

#define LEVERS_CUDA_CHECK(call)                                                                   \
    do {                                                                                          \
        const cudaError_t levers_cuda_status = (call);                                            \
        if (levers_cuda_status != cudaSuccess)                                                    \
            ::levers::detail::cuda_failed(#call, levers_cuda_status, __FILE__, __LINE__);         \
    } while (0)

#define LEVERS_CUBLAS_CHECK(call)                                                                 \
    do {                                                                                          \
        const int levers_cublas_status = static_cast<int>(call);                                  \
        if (levers_cublas_status != 0)                                                            \
            ::levers::detail::cublas_failed(#call, levers_cublas_status, __FILE__, __LINE__);     \
    } while (0)
