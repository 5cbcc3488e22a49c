// A run's checkpoints on disk: <run>/checkpoints/step-00000100.ckpt (the
// newest `keep_last` of them) and best.ckpt (the best value of a metric), and
// finding the one `--resume` means.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

namespace levers {

class CheckpointKeeper {
public:
    CheckpointKeeper(std::filesystem::path run_dir, int keep_last, std::string best_metric, bool maximize);

    // Writes step `step` through `write(path)` (atomic), then drops the oldest
    // beyond keep_last (with the shard files beside them); also writes
    // best.ckpt when `metric` beats the best so far, copying step `step`'s
    // shard files beside it.
    void save(long step, std::optional<double> metric, const std::function<void(const std::filesystem::path&)>& write);
    // Where step `step`'s checkpoint goes (its shards are written beside it first).
    std::filesystem::path step_path(long step) const;
    const std::string& best_metric() const { return best_metric_; }

private:
    std::filesystem::path dir_;
    int keep_last_;
    std::string best_metric_;
    bool maximize_;
    std::optional<double> best_;
};

// The newest step-*.ckpt of run directory `run` (or of a checkpoints
// directory itself), if it has one.
std::optional<std::filesystem::path> newest_checkpoint(const std::filesystem::path& run);

// The checkpoint `--resume WHAT` names: a checkpoint file; a run directory (its
// newest); or "latest" (the newest of the recipe's runs under ./runs that has
// one). Throws levers::Error saying where it looked.
std::filesystem::path find_checkpoint(const std::string& what, const std::string& recipe);

}  // namespace levers
