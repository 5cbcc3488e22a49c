// Early stopping: training ends when an evaluation metric has not improved
// for `patience` evaluations. The record (best metric, its step, evaluations
// without gain) lives in LoopState, so a resumed run stops where it would have.
#pragma once

#include "levers/train/loop_state.hpp"

#include <map>
#include <string>

namespace levers::train {

using Metrics = std::map<std::string, double>;

struct EarlyStopping {
    std::string metric;  // empty: off
    long patience = 0;
    bool maximize = false;
    double min_delta = 0;  // smaller changes are not improvements
};

// Records evaluation `eval` of step st.step in `st` and says whether to stop
// (never at the `last` step: the run ends anyway). Collective in a multi-rank
// job: the ranks' metrics agree, so do their decisions, and a vote makes it
// certain. Throws levers::Error if `eval` lacks the watched metric.
bool should_stop(const EarlyStopping& es, LoopState& st, const Metrics& eval, bool last);

// The console's line for a stop.
std::string stop_line(const EarlyStopping& es, const LoopState& st);

}  // namespace levers::train
