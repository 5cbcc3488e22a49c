// Whether this machine has no GPU: each GPU test is skipped there, and
// counted as skipped (doctest's skip decorator).
#pragma once

#include "levers/core/gpu.hpp"

namespace levers::testing {
inline const bool kNoGpu = gpu_count() == 0;
}  // namespace levers::testing
