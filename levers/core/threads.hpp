// The number of CPU threads levers' kernels use (OpenMP loops and Eigen's GEMM).
#pragma once

namespace levers {

// Sets the thread count for this process; n >= 1.
void set_threads(int n);
// The current thread count.
int threads();
// Cores this process may run on (affinity mask), at least 1.
int available_cores();

}  // namespace levers
