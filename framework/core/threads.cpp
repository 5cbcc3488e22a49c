#include "framework/core/threads.hpp"

#include "framework/core/error.hpp"

#include <omp.h>
#include <sched.h>

namespace levers {

void set_threads(int n) {
    LEVERS_CHECK(n >= 1, "thread count must be >= 1, got {}", n);
    omp_set_num_threads(n);  // Eigen's GEMM follows OpenMP's setting
}

int threads() { return omp_get_max_threads(); }

int available_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return 1;
}

}  // namespace levers
