#include "levers/recipe/checkpoints.hpp"

#include "levers/core/error.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace levers {

namespace fs = std::filesystem;

namespace {

// step-*.ckpt files of a checkpoints directory, oldest first (the names sort by step).
std::vector<fs::path> step_files(const fs::path& dir) {
    std::vector<fs::path> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string name = e.path().filename().string();
        if (name.starts_with("step-") && name.ends_with(".ckpt")) out.push_back(e.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

// The shard files beside checkpoint `file` (`<file>.shard-*`).
std::vector<fs::path> shard_files(const fs::path& file) {
    std::vector<fs::path> out;
    const std::string prefix = file.filename().string() + ".shard-";
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(file.parent_path(), ec))
        if (e.path().filename().string().starts_with(prefix)) out.push_back(e.path());
    return out;
}

// `from`'s shard files copied beside `to`, each atomically (a temporary, then renamed); `to`'s old ones dropped.
void copy_shards(const fs::path& from, const fs::path& to) {
    for (const auto& old : shard_files(to)) fs::remove(old);
    const std::string suffix_at = from.filename().string();
    for (const auto& shard : shard_files(from)) {
        const fs::path dst = to.string() + shard.filename().string().substr(suffix_at.size());
        const fs::path tmp = dst.string() + ".tmp";
        fs::copy_file(shard, tmp, fs::copy_options::overwrite_existing);
        fs::rename(tmp, dst);
    }
}

}  // namespace

std::optional<fs::path> newest_checkpoint(const fs::path& run) {
    auto files = step_files(run / "checkpoints");
    if (files.empty()) files = step_files(run);  // the checkpoints directory itself
    if (files.empty()) return std::nullopt;
    return files.back();
}

CheckpointKeeper::CheckpointKeeper(fs::path run_dir, int keep_last, std::string best_metric, bool maximize)
    : dir_(run_dir / "checkpoints"), keep_last_(keep_last), best_metric_(std::move(best_metric)), maximize_(maximize) {
    fs::create_directories(dir_);
}

fs::path CheckpointKeeper::step_path(long step) const { return dir_ / fmt::format("step-{:08}.ckpt", step); }

void CheckpointKeeper::save(long step, std::optional<double> metric,
                            const std::function<void(const fs::path&)>& write) {
    write(step_path(step));
    auto files = step_files(dir_);
    for (std::size_t i = 0; i + static_cast<std::size_t>(keep_last_) < files.size(); ++i) {
        fs::remove(files[i]);  // the file first: without it, its shards are no checkpoint
        for (const auto& shard : shard_files(files[i])) fs::remove(shard);
    }
    if (!best_metric_.empty() && metric &&
        (!best_ || (maximize_ ? *metric > *best_ : *metric < *best_))) {
        best_ = metric;
        const fs::path best = dir_ / "best.ckpt";
        fs::remove(best);  // its old shards go next, the new ones come before the file
        copy_shards(step_path(step), best);
        write(best);
    }
}

fs::path find_checkpoint(const std::string& what, const std::string& recipe) {
    if (what != "latest") {
        const fs::path p = what;
        LEVERS_CHECK(fs::exists(p), "--resume {}: no such file or directory", what);
        if (fs::is_regular_file(p)) return p;
        auto newest = newest_checkpoint(p);
        LEVERS_CHECK(newest.has_value(), "--resume {}: the directory holds no checkpoints (checkpoints/step-*.ckpt)",
                     what);
        return *newest;
    }
    const fs::path runs = fs::path("runs") / recipe;
    std::vector<fs::path> dirs;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(runs, ec))
        if (e.is_directory() && !e.is_symlink()) dirs.push_back(e.path());
    std::sort(dirs.rbegin(), dirs.rend());  // newest first: the names are times
    for (const auto& d : dirs)
        if (auto newest = newest_checkpoint(d)) return *newest;
    LEVERS_FAIL("--resume latest: no run under {} has a checkpoint (the recipe writes them with checkpoint_every)",
                runs.string());
}

}  // namespace levers
