// Rank 0's console during training: permanent lines (progress windows,
// evaluations), and one line redrawn in place between them (step, loss,
// throughput, time left): directly on a terminal, or as marked lines the
// launcher draws (live_progress.hpp). Other ranks print nothing.
#pragma once

#include "levers/core/live_progress.hpp"

#include <chrono>
#include <map>
#include <string>

namespace levers::train {

class ProgressConsole {
public:
    explicit ProgressConsole(LiveProgress mode);

    void line(const std::string& text);
    // Whether a redraw is due (at most four a second, and never without a live line).
    bool due() const;
    void redraw(const std::string& text);

private:
    LiveProgress mode_;
    std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// "eval step    50 | accuracy 0.8829 | loss 0.3312"
std::string eval_line(long step, const std::map<std::string, double>& metrics);
// "4m07s", "1h02m"
std::string duration_text(double seconds);

}  // namespace levers::train
