// Learning rate: linear warmup from 0 to `peak` over `warmup` steps, then
// cosine decay to `peak · min_ratio` at step `total` (and flat after).
#pragma once

namespace levers::train {

struct LrSchedule {
    double peak = 1e-3;
    double min_ratio = 0.1;
    long warmup = 0;
    long total = 1;

    // Learning rate for step `step`, counted from 0.
    double at(long step) const;
};

}  // namespace levers::train
