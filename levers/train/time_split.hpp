// Where a rank's training time went, evaluation excluded: computing,
// communication that backward did not hide, and waiting at barriers for
// slower ranks (the three add up to the training time), plus the
// communication that ran hidden behind backward on the communication thread.
#pragma once

#include "levers/distributed/backend.hpp"
#include "levers/distributed/grad_sync.hpp"

namespace levers::train {

struct Split {
    double compute = 0, communication = 0, waiting = 0, hidden_communication = 0;
};

class TimeSplit {
public:
    // From now, for the job's group (none: a world of one, all compute) and
    // its gradient buckets (null in a world of one).
    TimeSplit(const dist::Backend* group, const dist::GradientSync* buckets);

    // Around an evaluation: its collectives stay out of the split.
    void begin_excluded();
    void end_excluded();

    Split at(double train_seconds) const;

private:
    const dist::Backend* group_;
    const dist::GradientSync* buckets_;
    dist::Backend::Timing start_, excluded_start_;
    double excluded_collectives_ = 0, excluded_waiting_ = 0;
};

}  // namespace levers::train
