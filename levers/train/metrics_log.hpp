// The metrics files of a run directory, written by rank 0 as training goes:
//
//   metrics.jsonl  one object per line: {"kind":"train","step":..,"loss":..,...}
//                  (with the step's own metrics, "rewards/chosen":.. for dpo)
//                  or {"kind":"eval","step":..,"val_loss":..,...}
//   metrics.csv    step,loss,lr,grad_norm,items,items_per_second,wall_s (every
//                  step; items: tokens or samples trained on so far, all ranks)
//   eval.csv       step,wall_s,<each evaluation metric>
//
// Rows reach the files at least once a second, at every evaluation, on
// flush() (before a checkpoint) and at the end: a crashed run keeps its curves
// to its last second, and a small model's step of 0.2 ms does not wait on two
// writes of its own.
#pragma once

#include "levers/core/clock.hpp"

#include <filesystem>
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace levers::train {

class MetricsLog {
public:
    explicit MetricsLog(const std::filesystem::path& dir);  // appends when the files exist

    // `more`: the step's own metrics (a preference run's rewards), in its metrics.jsonl row.
    void train(long step, double loss, double lr, double grad_norm, std::int64_t items, double items_per_second,
               double wall_s, const std::map<std::string, double>& more = {});
    void eval(long step, const std::map<std::string, double>& metrics, double wall_s);
    // Every row so far to the files (the next checkpoint's resume trims from there).
    void flush();

private:
    void flush_if_due();

    std::filesystem::path dir_;
    std::ofstream jsonl_, csv_, eval_csv_;
    Clock::time_point flushed_ = Clock::now();
    std::vector<std::string> eval_columns_;
};

// Drops the rows of the metrics files in `dir` after step `step`: a run that
// starts there (restarted from that step's checkpoint) writes them again.
void trim_metrics(const std::filesystem::path& dir, long step);

}  // namespace levers::train
