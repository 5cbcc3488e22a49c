#include "kernels/cuda/cuda_check.hpp"

#include "framework/core/error.hpp"

#include <cstdlib>

namespace levers::detail {

void cuda_failed(const char* call, cudaError_t status, const char* file, int line) {
    const char* rank = std::getenv("RANK");
    throw_error(file, line, fmt::format("rank {}: {} failed: {} ({})", rank ? rank : "0", call,
                                        cudaGetErrorString(status), cudaGetErrorName(status)));
}

void cublas_failed(const char* call, int status, const char* file, int line) {
    const char* rank = std::getenv("RANK");
    throw_error(file, line, fmt::format("rank {}: {} failed: cuBLAS status {}", rank ? rank : "0", call, status));
}

void op_refused(const char* what, const char* file, int line) {
    const char* rank = std::getenv("RANK");
    throw_error(file, line, fmt::format("rank {}: {}", rank ? rank : "0", what));
}

}  // namespace levers::detail
