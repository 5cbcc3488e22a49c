// The run's checkpoint files: the newest kept, best.ckpt, and the shard files
// beside each (ZeRO's optimizer state, one per rank).
#include "levers/recipe/checkpoints.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>

#include <fstream>

using namespace levers;
namespace fs = std::filesystem;

namespace {
std::string file_text(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
}
}  // namespace

TEST_CASE("the keeper drops old checkpoints with their shards and gives best.ckpt copies of the best step's") {
    testing::TempDir tmp;
    CheckpointKeeper keeper(tmp.path(), 2, "val_loss", false);
    const fs::path dir = tmp.path() / "checkpoints";
    // Each step: the ranks' shards first, then the file (as the loop writes them).
    auto save = [&](long step, double metric) {
        for (int r = 0; r < 2; ++r)
            std::ofstream(keeper.step_path(step).string() + ".shard-" + std::to_string(r) + "-of-2")
                << "shard " << r << " of step " << step;
        keeper.save(step, metric, [&](const fs::path& p) { std::ofstream(p) << "step " << step; });
    };
    save(1, 3.0);
    save(2, 1.0);  // the best
    save(3, 2.0);
    CHECK(!fs::exists(dir / "step-00000001.ckpt"));
    CHECK(!fs::exists(dir / "step-00000001.ckpt.shard-0-of-2"));
    CHECK(!fs::exists(dir / "step-00000001.ckpt.shard-1-of-2"));
    CHECK(fs::exists(dir / "step-00000003.ckpt.shard-1-of-2"));
    CHECK(file_text(dir / "best.ckpt") == "step 2");
    CHECK(file_text(dir / "best.ckpt.shard-0-of-2") == "shard 0 of step 2");
    CHECK(file_text(dir / "best.ckpt.shard-1-of-2") == "shard 1 of step 2");
    save(4, 0.5);  // a new best replaces the old one's shards
    CHECK(file_text(dir / "best.ckpt.shard-1-of-2") == "shard 1 of step 4");
    CHECK(!fs::exists(dir / "step-00000002.ckpt.shard-0-of-2"));
}
