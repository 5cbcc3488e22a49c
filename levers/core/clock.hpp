#pragma once
// The clock levers times itself with (monotonic), and seconds since a point of it.

#include <chrono>

namespace levers {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

}  // namespace levers
