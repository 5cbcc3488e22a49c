// Where a run is, beside its parameters and optimizer moments: what the loop
// needs to continue a run exactly where it stopped (saved in checkpoints).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>

namespace levers::train {

struct LoopState {
    long step = 0;             // optimizer steps done
    std::int64_t items = 0;    // tokens or samples trained on, all ranks
    double window_loss = 0;    // the open progress window: loss sum and steps
    long window_steps = 0;
    double last_loss = 0;      // the last closed window's mean: a run resumed at its last step reports it
    bool have_best = false;    // early stopping's and the best checkpoint's record
    double best_metric = 0;
    long best_step = 0;
    long evals_without_gain = 0;
    double train_seconds = 0;  // training time so far, earlier processes included
};
nlohmann::json to_json(const LoopState& s);
// Throws levers::Error naming `file` if a field is missing or of the wrong type.
LoopState loop_state_from_json(const nlohmann::json& j, const std::string& file);

}  // namespace levers::train
