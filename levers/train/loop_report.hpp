// What the training loop reports as it goes: rank 0's console (a progress
// line per log window, a line redrawn in place between them, evaluations),
// the metrics files' rows, and the clocks (training time without
// evaluation, the throughput). train_loop (loop.cpp) calls it after each
// step and evaluation; the loop's own steps stay the loop's.
#pragma once

#include "levers/core/clock.hpp"
#include "levers/train/grad_accumulation.hpp"
#include "levers/train/loop.hpp"
#include "levers/train/progress_console.hpp"

#include <cstdint>

namespace levers::train {

class LoopReport {
public:
    // From `options.start` (a resumed run's clock and progress window); rank 0
    // writes `options.metrics`, where given.
    LoopReport(const LoopOptions& options, bool main_rank);

    // A step is done: `st` takes it (step, items, the window's loss); its
    // metrics row, and the window's progress line every log_every steps and at
    // the last (into `result`'s loss and curve), else a redraw when one is due.
    void stepped(LoopState& st, const StepGradients& grads, double lr, double grad_norm, Clock::time_point began,
                 LoopResult& result);
    // Early stopping's line, then the progress line of the window it cuts short.
    void stopping_early(const LoopState& st);
    void close_window(LoopState& st, LoopResult& result);
    // An evaluation of `seconds` at `step`: its line and row; its time is left out of training's.
    void evaluated(long step, const Metrics& metrics, double seconds);

    // Training time so far (evaluation excluded, earlier processes of a resumed run included).
    double train_seconds() const;
    // The loop's end: its wall time and this process's training throughput
    // into `result`; returns this process's training seconds.
    double finish(LoopResult& result) const;

private:
    void log_window(LoopState& st, double lr, double grad_norm, LoopResult& result);

    const LoopOptions& options_;
    MetricsLog* metrics_;
    ProgressConsole console_;
    Clock::time_point start_, window_start_;
    double eval_seconds_ = 0, train_seconds_before_ = 0;
    double last_lr_ = 0, last_norm_ = 0;  // the last step's, for a window cut short
    std::int64_t window_items_ = 0, items_here_ = 0;
    Metrics window_metrics_;  // the steps' own metrics (MicroResult::metrics) summed over the window
    long window_metric_steps_ = 0;
};

}  // namespace levers::train
