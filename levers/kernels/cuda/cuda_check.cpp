#include "levers/kernels/cuda/cuda_check.hpp"

#include "levers/core/error.hpp"

namespace levers::detail {

// Which rank failed is said by whoever reports the error (the rank's
// "rank N:" and the launcher's "[rank N]"), not here.
void cuda_failed(const char* call, cudaError_t status, const char* file, int line) {
    throw_error(file, line, fmt::format("{} failed: {} ({})", call, cudaGetErrorString(status), cudaGetErrorName(status)));
}

void cublas_failed(const char* call, int status, const char* file, int line) {
    throw_error(file, line, fmt::format("{} failed: cuBLAS status {}", call, status));
}

void op_refused(const char* what, const char* file, int line) { throw_error(file, line, what); }

}  // namespace levers::detail
