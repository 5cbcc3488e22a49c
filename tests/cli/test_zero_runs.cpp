// ZeRO stages 1 and 2 against data parallelism, and resuming on another
// number of ranks with the global batch kept, through the real binaries.
#include "levers/core/checkpoint.hpp"
#include "levers/train/train_state.hpp"
#include "tests/cli/run_metrics.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

// A tiny GPT, 8 steps, checkpoints at 4 and 8, buckets of ~2600 elements (several per model).
std::vector<std::string> tiny(const fs::path& out, int gpus, long accum, int zero) {
    return concat({"run", "pretrain", "--gpus", std::to_string(gpus), "--threads", "1", "--out", out.string(), "--set",
                   "steps=8", "--set", "checkpoint_every=4", "--set", "eval_every=0", "--set", "sample_tokens=0",
                   "--set", "log_every=1", "--set", "warmup=2", "--set", "bucket_mb=0.01", "--set",
                   "grad_accum=" + std::to_string(accum), "--set", "zero=" + std::to_string(zero)},
                  kTinyGpt);
}

std::string fmt_name(const char* what, int a, int b) { return std::string(what) + std::to_string(a) + "_" + std::to_string(b); }

// Losses agree within floating-point reduction differences.
void check_close(const std::vector<double>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        CAPTURE(i);
        CHECK(std::abs(a[i] - b[i]) <= 1e-6 * std::abs(a[i]));
    }
}

}  // namespace

TEST_CASE("ZeRO-1 and ZeRO-2 follow data parallelism's loss curve; their checkpoints hold the whole optimizer state" *
          needs({Data::books})) {
    TempDir tmp;
    for (int gpus : {2, 3}) {  // 3: chunks of uneven size
        CAPTURE(gpus);
        const fs::path ddp = tmp.path() / ("ddp" + std::to_string(gpus));
        REQUIRE(run_recipe(tiny(ddp, gpus, 2, 0)).code == 0);
        for (int zero : {1, 2}) {
            CAPTURE(zero);
            const fs::path z = tmp.path() / ("zero" + std::to_string(zero) + "_" + std::to_string(gpus));
            auto r = run_recipe(tiny(z, gpus, 2, zero));
            INFO(r.output);
            REQUIRE(r.code == 0);
            check_close(losses(ddp, 1), losses(z, 1));
            // Each rank wrote its shard of AdamW's state beside the file, which holds none itself.
            const fs::path at8 = z / "checkpoints" / "step-00000008.ckpt";
            for (int r = 0; r < gpus; ++r) CHECK(fs::exists(levers::train::shard_path(at8, r, gpus)));
            CHECK(levers::read_checkpoint(at8).metadata["adamw_shards"] == gpus);
            CHECK(!fs::exists(levers::train::shard_path(at8, gpus, gpus + 1)));
            const auto a = levers::train::read_train_state(ddp / "checkpoints" / "step-00000008.ckpt");
            const auto b = levers::train::read_train_state(at8);  // the shards put together
            for (const char* name : {"adamw/m", "adamw/v"}) {
                CAPTURE(name);
                const auto &x = a.file.at(name), &y = b.file.at(name);
                REQUIRE(x.numel() == y.numel());
                double worst = 0, scale = 0;
                for (std::int64_t i = 0; i < x.numel(); ++i) {
                    worst = std::max(worst, std::abs(double(x.data<float>()[i]) - double(y.data<float>()[i])));
                    scale = std::max(scale, std::abs(double(x.data<float>()[i])));
                }
                CHECK(worst <= 1e-5 * scale);
            }
        }
    }
}

TEST_CASE("a run resumed on another number of ranks keeps its global batch and its loss curve: 1 -> 2, 2 -> 4, "
          "4 -> 1, with and without ZeRO" * needs({Data::books})) {
    TempDir tmp;
    struct Move {
        int from, to;
        long accum;  // the first run's: from x accum micro-batches per step, kept
        int zero_before;
    };
    for (const Move m : {Move{1, 2, 4, 0}, Move{2, 4, 2, 1}, Move{4, 1, 1, 2}}) {
        CAPTURE(m.from);
        CAPTURE(m.to);
        const fs::path first = tmp.path() / fmt_name("first", m.from, m.to);
        auto a = run_recipe(tiny(first, m.from, m.accum, m.zero_before));
        INFO(a.output);
        REQUIRE(a.code == 0);
        const fs::path at4 = first / "checkpoints" / "step-00000004.ckpt";
        for (int zero : {0, 2}) {
            CAPTURE(zero);
            const fs::path again = tmp.path() / fmt_name("again", m.to, zero);
            auto args = tiny(again, m.to, m.accum, zero);  // grad_accum as saved: the loop adjusts it
            args.insert(args.end(), {"--resume", at4.string()});
            auto b = run_recipe(args);
            INFO(b.output);
            REQUIRE(b.code == 0);
            const long accum = m.accum * m.from / m.to;
            CHECK(b.output.find("resuming a " + std::to_string(m.from) + "-rank run on " + std::to_string(m.to) +
                                " rank" + (m.to == 1 ? "" : "s") + ": grad_accum " + std::to_string(m.accum) +
                                " -> " + std::to_string(accum)) != std::string::npos);
            check_close(losses(first, 5), losses(again, 5));
            CHECK(losses(again, 0).size() == 4);  // steps 5..8
        }
    }
}

TEST_CASE("resuming on a number of ranks that cannot share the global batch is refused before anything starts" *
          needs({Data::books})) {
    TempDir tmp;
    const fs::path first = tmp.path() / "first";
    REQUIRE(run_recipe(tiny(first, 2, 1, 0)).code == 0);
    auto args = tiny(tmp.path() / "again", 3, 1, 0);
    args.insert(args.end(), {"--resume", (first / "checkpoints" / "step-00000004.ckpt").string()});
    auto r = run_recipe(args);
    CHECK(r.code == 2);
    CHECK(r.output.find("2 micro-batches per step (2 ranks x grad_accum 1), which 3 ranks cannot share evenly; "
                        "resume it with --gpus 1, 2") != std::string::npos);
    CHECK(!fs::exists(tmp.path() / "again"));  // no run directory made
}

TEST_CASE("a recipe whose batch per rank follows the GPU count, resumed on another count, stops at the first "
          "resumed step before it checkpoints" * needs({Data::books})) {
    TempDir tmp;
    // global_batch=4: 2 per rank on 2 ranks; resumed on 1 rank the loop keeps 2 micro-batches per step, but the
    // recipe makes each of them 4 windows, so a step would train 8 windows where the run trained 4.
    const fs::path first = tmp.path() / "first";
    auto a = run_recipe(concat(tiny(first, 2, 1, 0), {"--set", "global_batch=4"}));
    INFO(a.output);
    REQUIRE(a.code == 0);
    auto args = concat(tiny(tmp.path() / "again", 1, 1, 0), {"--set", "global_batch=4"});
    args.insert(args.end(), {"--resume", (first / "checkpoints" / "step-00000004.ckpt").string()});
    auto r = run_recipe(args);
    INFO(r.output);
    CHECK(r.code != 0);
    CHECK(r.output.find("resumed on 1 rank, a step trained 128 tok where the 2-rank run trained 64: recipe "
                        "'pretrain' sizes its batch by the GPU count, so the data would differ; resume on 2 "
                        "ranks") != std::string::npos);
    CHECK(!fs::exists(tmp.path() / "again" / "checkpoints" / "step-00000005.ckpt"));
}

TEST_CASE("sharded checkpoints: old ones go with their shards, a missing shard is named" *
          needs({Data::books})) {
    TempDir tmp;
    const fs::path run = tmp.path() / "run";
    auto args = tiny(run, 2, 1, 2);
    args.insert(args.end(), {"--set", "checkpoint_every=2", "--set", "eval_every=2"});  // steps 2, 4, 6, 8; keeps 3
    auto r = run_recipe(args);
    INFO(r.output);
    REQUIRE(r.code == 0);
    const fs::path dir = run / "checkpoints";
    CHECK(!fs::exists(dir / "step-00000002.ckpt"));
    CHECK(!fs::exists(levers::train::shard_path(dir / "step-00000002.ckpt", 0, 2)));
    CHECK(!fs::exists(levers::train::shard_path(dir / "step-00000002.ckpt", 1, 2)));
    for (const char* kept : {"step-00000004.ckpt", "step-00000006.ckpt", "step-00000008.ckpt"})
        for (int rank : {0, 1}) CHECK(fs::exists(levers::train::shard_path(dir / kept, rank, 2)));
    fs::remove(levers::train::shard_path(dir / "step-00000004.ckpt", 1, 2));
    auto again = tiny(tmp.path() / "again", 2, 1, 2);
    again.insert(again.end(), {"--resume", (dir / "step-00000004.ckpt").string()});
    auto b = run_recipe(again);
    CHECK(b.code == 2);
    CHECK(b.output.find("step-00000004.ckpt: its optimizer shard " +
                        levers::train::shard_path(dir / "step-00000004.ckpt", 1, 2).string() + " is missing") !=
          std::string::npos);
}

TEST_CASE("a sharded ZeRO-2 checkpoint of a Llama exports to one Hugging Face directory: resumed on one rank at its "
          "last step, the run trains nothing and writes the model" * needs({Data::books})) {
    TempDir tmp;
    const std::vector<std::string> small = {"--threads", "1", "--set", "tokenizer=" + tiny_tokenizer_dir().string(),
                                            "--set", "hidden=64", "--set", "intermediate=96",
                                            "--set", "layers=1", "--set", "heads=1", "--set", "kv_heads=1", "--set",
                                            "context=64", "--set", "batch_size=1", "--set", "eval_every=0", "--set",
                                            "eval_batches=1", "--set", "sample_tokens=0", "--set", "steps=2"};
    const fs::path trained = tmp.path() / "trained", exported = tmp.path() / "exported";
    auto a = run_recipe(concat({"run", "pretrain_llama", "--gpus", "2", "--out", trained.string(), "--set", "zero=2",
                                "--set", "checkpoint_every=2"}, small));
    INFO(a.output);
    REQUIRE(a.code == 0);
    const fs::path at2 = trained / "checkpoints" / "step-00000002.ckpt";
    REQUIRE(fs::exists(levers::train::shard_path(at2, 1, 2)));
    auto b = run_recipe(concat({"run", "pretrain_llama", "--gpus", "1", "--out", exported.string(), "--resume",
                                at2.string()}, small));
    INFO(b.output);
    REQUIRE(b.code == 0);
    CHECK(read_text(exported / "metrics.csv").find('\n') + 1 == read_text(exported / "metrics.csv").size());  // header only
    CHECK(read_text(trained / "model" / "model.safetensors") == read_text(exported / "model" / "model.safetensors"));
    CHECK(fs::exists(exported / "model" / "tokenizer.json"));
}
