#include "levers/core/threads.hpp"

#include "levers/core/error.hpp"

#include <omp.h>
#include <sched.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

namespace levers {

void set_threads(int n) {
    LEVERS_CHECK(n >= 1, "thread count must be >= 1, got {}", n);
    omp_set_num_threads(n);  // Eigen's and OpenBLAS's products follow OpenMP's setting
    // Flush subnormal floats to zero on every thread: tiny gradients and Adam
    // moments otherwise turn into subnormals that cost ~100 cycles each.
#if defined(__SSE__)
#pragma omp parallel
    _mm_setcsr(_mm_getcsr() | 0x8040);  // FTZ | DAZ
#endif
}

int threads() { return omp_get_max_threads(); }

int available_cores() {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
    return 1;
}

}  // namespace levers
