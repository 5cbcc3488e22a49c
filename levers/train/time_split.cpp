#include "levers/train/time_split.hpp"

#include <algorithm>

namespace levers::train {

namespace {
dist::Backend::Timing timing_of(const dist::Backend* group) { return group ? group->timing() : dist::Backend::Timing{}; }
}  // namespace

TimeSplit::TimeSplit(const dist::Backend* group, const dist::GradientSync* buckets)
    : group_(group), buckets_(buckets), start_(timing_of(group)) {}

void TimeSplit::begin_excluded() { excluded_start_ = timing_of(group_); }

void TimeSplit::end_excluded() {
    const auto now = timing_of(group_);
    excluded_collectives_ += now.in_collectives - excluded_start_.in_collectives;
    excluded_waiting_ += now.waiting - excluded_start_.waiting;
}

Split TimeSplit::at(double train_seconds) const {
    if (!group_) return {.compute = train_seconds};
    const auto now = timing_of(group_);
    const double busy = buckets_ ? buckets_->busy_seconds() : 0;
    const double busy_waiting = buckets_ ? buckets_->busy_waiting_seconds() : 0;
    const double exposed = buckets_ ? buckets_->exposed_seconds() : 0;
    // Collectives of this (main) thread: all of them less the communication thread's.
    const double main_collectives = now.in_collectives - start_.in_collectives - excluded_collectives_ - busy;
    const double main_waiting = now.waiting - start_.waiting - excluded_waiting_ - busy_waiting;
    return {.compute = train_seconds - exposed - main_collectives,
            .communication = exposed + main_collectives - main_waiting,
            .waiting = main_waiting,
            .hidden_communication = std::max(0.0, busy - exposed)};
}

}  // namespace levers::train
