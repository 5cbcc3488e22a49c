// Timing for the benchmarks: a call's wall time, the median of several.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace levers::bench {

inline double ms_of(const std::function<void()>& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace levers::bench
