#include "levers/train/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace levers::train {

double LrSchedule::at(long step) const {
    if (step < warmup) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup);
    const double span = std::max(1L, total - warmup);
    const double progress = std::min(1.0, static_cast<double>(step - warmup) / span);
    const double cosine = 0.5 * (1 + std::cos(std::numbers::pi * progress));
    return peak * (min_ratio + (1 - min_ratio) * cosine);
}

}  // namespace levers::train
