// Shared by every op: the host/device qualifier for per-element and per-row
// maths (so CPU tests exercise the same functions the CUDA kernels run), and
// the index type.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define LEVERS_HD __host__ __device__ inline
#else
#define LEVERS_HD inline
#endif

namespace levers::kernels {
using index_t = std::int64_t;
}
