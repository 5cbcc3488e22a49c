// Checkpoints, exact resume, metrics files and early stopping, through the real binaries.
#include "levers/core/checkpoint.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"
#include "tests/cli/run_metrics.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>

using namespace levers::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

Ran run(const char* bin, const std::vector<std::string>& args) { return run_program(bin, args); }

// A GPT small enough that 8 steps take well under a second.
std::vector<std::string> tiny_pretrain(const fs::path& out, int gpus) {
    return concat({"run", "pretrain", "--gpus", std::to_string(gpus), "--threads", "1", "--out", out.string(), "--set",
                   "steps=8", "--set", "checkpoint_every=4", "--set", "eval_every=4", "--set", "sample_tokens=0",
                   "--set", "log_every=3", "--set", "warmup=2"},
                  kTinyGpt);
}

// The tensors that define where training is: parameters and AdamW's moments.
void check_same_state(const fs::path& a, const fs::path& b) {
    const auto x = levers::read_checkpoint(a), y = levers::read_checkpoint(b);
    REQUIRE(x.tensors.size() == y.tensors.size());
    for (std::size_t i = 0; i < x.tensors.size(); ++i) {
        CAPTURE(x.tensors[i].name);
        REQUIRE(x.tensors[i].name == y.tensors[i].name);
        REQUIRE(x.tensors[i].tensor.bytes() == y.tensors[i].tensor.bytes());
        CHECK(std::memcmp(x.tensors[i].tensor.raw(), y.tensors[i].tensor.raw(), x.tensors[i].tensor.bytes()) == 0);
    }
    CHECK(x.metadata["loop"]["step"] == y.metadata["loop"]["step"]);
    CHECK(x.metadata["data"] == y.metadata["data"]);
}

}  // namespace

TEST_CASE("a run resumed from step 4 ends bitwise where the uninterrupted run ends, on 1 and 2 ranks" *
          needs({Data::books})) {
    TempDir tmp;
    for (int gpus : {1, 2}) {
        CAPTURE(gpus);
        const fs::path full = tmp.path() / ("full" + std::to_string(gpus));
        const fs::path resumed = tmp.path() / ("resumed" + std::to_string(gpus));
        auto a = run_recipe(tiny_pretrain(full, gpus));
        INFO(a.output);
        REQUIRE(a.code == 0);
        const fs::path at4 = full / "checkpoints" / "step-00000004.ckpt";
        REQUIRE(fs::exists(at4));
        auto args = tiny_pretrain(resumed, gpus);
        args.insert(args.end(), {"--resume", at4.string()});
        auto b = run_recipe(args);
        INFO(b.output);
        REQUIRE(b.code == 0);
        CHECK(b.output.find("resumed from " + at4.string() + " at step 4") != std::string::npos);
        check_same_state(full / "checkpoints" / "step-00000008.ckpt", resumed / "checkpoints" / "step-00000008.ckpt");
        CHECK(curve(full, 5) == curve(resumed, 5));
        CHECK(curve(resumed, 0).size() == 4);  // steps 5..8 only
        // The final results agree too (the loss of the last progress window, the validation loss).
        auto ra = nlohmann::json::parse(last_line(a.output)), rb = nlohmann::json::parse(last_line(b.output));
        CHECK(ra["loss"] == rb["loss"]);
        CHECK(ra["val_loss"] == rb["val_loss"]);
        CHECK(nlohmann::json::parse(read_text(resumed / "config.json"))["resumed_from"] == at4.string());
        // Resumed at its last step (a job killed after its final checkpoint), nothing is left to train: the run
        // reports the loss it ended with, not none.
        auto at_end = tiny_pretrain(tmp.path() / ("at_end" + std::to_string(gpus)), gpus);
        at_end.insert(at_end.end(), {"--resume", (full / "checkpoints" / "step-00000008.ckpt").string()});
        auto e = run_recipe(at_end);
        INFO(e.output);
        REQUIRE(e.code == 0);
        CHECK(nlohmann::json::parse(last_line(e.output))["loss"] == ra["loss"]);
    }
    // On another GPU count it continues, the global batch kept (test_zero_runs.cpp checks the curve).
    auto other = tiny_pretrain(tmp.path() / "other", 1);
    other.insert(other.end(), {"--resume", (tmp.path() / "full2").string()});  // a run directory: its newest
    auto c = run_recipe(other);
    CHECK(c.code == 0);
    CHECK(c.output.find("resuming a 2-rank run on 1 rank: grad_accum 1 -> 2") != std::string::npos);
}

TEST_CASE("--restarts: a rank killed mid-run, the job starts again from its latest checkpoint and ends bitwise as "
          "an uninterrupted run, on 1 and 2 ranks" * needs({Data::books})) {
    TempDir tmp;
    for (int gpus : {1, 2}) {
        CAPTURE(gpus);
        auto args = [&](const fs::path& out) {
            return concat({"run", "pretrain", "--gpus", std::to_string(gpus), "--threads", "1", "--output", "rank0",
                           "--out", out.string(), "--set", "steps=3000", "--set", "checkpoint_every=500", "--set",
                           "eval_every=1000", "--set", "sample_tokens=0", "--set", "log_every=100", "--set",
                           "warmup=2"},
                          kTinyGpt);
        };
        const fs::path plain = tmp.path() / ("plain" + std::to_string(gpus));
        const fs::path restarted = tmp.path() / ("restarted" + std::to_string(gpus));
        auto a = run_recipe(args(plain));
        INFO(a.output);
        REQUIRE(a.code == 0);

        auto b = start_recipe(concat(args(restarted), {"--restarts", "2"}));
        // Killed once the first checkpoint is on disk: the steps after it are lost and redone.
        const auto until = std::chrono::steady_clock::now() + 60s;
        while (!fs::exists(restarted / "checkpoints" / "step-00000500.ckpt") && std::chrono::steady_clock::now() < until)
            std::this_thread::sleep_for(1ms);
        auto ranks = children_of(b.pid);
        REQUIRE(ranks.size() == static_cast<std::size_t>(gpus));
        std::sort(ranks.begin(), ranks.end());  // spawned in rank order
        ::kill(ranks.back(), SIGKILL);
        const auto status = b.wait(120s);
        INFO(b.output());
        REQUIRE(status.has_value());
        REQUIRE((WIFEXITED(*status) && WEXITSTATUS(*status) == 0));
        const std::string killed = "rank " + std::to_string(gpus - 1) + " was killed by signal 9 (SIGKILL)";
        CHECK(b.output().find("recipe pretrain: " + killed + "; restart 1 of 2, from checkpoints/step-") !=
              std::string::npos);
        const auto restarts = nlohmann::json::parse(read_text(restarted / "restarts.json"));
        REQUIRE(restarts.size() == 1);
        CHECK(restarts[0]["after"] == killed);
        CHECK(restarts[0]["from"].get<std::string>().starts_with("checkpoints/step-"));

        // The same training to the last bit: every logged step (the redone ones written once), the
        // final checkpoint and the result but for its clocks.
        CHECK(curve(plain, 0) == curve(restarted, 0));
        check_same_state(plain / "checkpoints" / "step-00003000.ckpt", restarted / "checkpoints" / "step-00003000.ckpt");
        auto ra = nlohmann::json::parse(read_text(plain / "result.json"));
        auto rb = nlohmann::json::parse(read_text(restarted / "result.json"));
        // Clocks differ, and memory peaks: the restarted process also held the checkpoint it read.
        for (const char* clock :
             {"seconds", "items_per_second", "tokens_per_second", "time_split", "peak_rss_mb", "peak_memory_mb"}) {
            ra.erase(clock);
            rb.erase(clock);
        }
        CHECK(rb["resumed_from"].get<std::string>().starts_with((restarted / "checkpoints" / "step-").string()));
        rb.erase("resumed_from");
        CHECK(ra == rb);
    }
    // Bad counts are refused before anything starts.
    auto bad = run_recipe(concat({"run", "pretrain", "--restarts", "-1"}, kTinyGpt));
    CHECK(bad.code == 2);
    CHECK(bad.output.find("--restarts must be >= 0") != std::string::npos);
}

TEST_CASE("a run keeps its metrics, its last checkpoints and the best one" * needs({Data::books})) {
    TempDir tmp;
    auto a = run_recipe(tiny_pretrain(tmp.path() / "r", 1));
    REQUIRE(a.code == 0);
    CHECK(curve(tmp.path() / "r", 0).size() == 8);
    CHECK(read_text(tmp.path() / "r" / "eval.csv").starts_with("step,wall_s,val_loss\n4,"));
    std::istringstream jsonl(read_text(tmp.path() / "r" / "metrics.jsonl"));
    std::string line;
    int train = 0, eval = 0;
    while (std::getline(jsonl, line)) {
        auto j = nlohmann::json::parse(line);
        (j["kind"] == "train" ? train : eval) += 1;
    }
    CHECK(train == 8);
    CHECK(eval == 2);

    // keep 3: a longer run keeps only the newest three step files.
    auto args = tiny_pretrain(tmp.path() / "long", 1);
    args.insert(args.end(), {"--set", "steps=20", "--set", "checkpoint_every=2"});
    REQUIRE(run_recipe(args).code == 0);
    std::vector<std::string> kept;
    for (const auto& e : fs::directory_iterator(tmp.path() / "long" / "checkpoints"))
        kept.push_back(e.path().filename().string());
    std::sort(kept.begin(), kept.end());
    CHECK(kept == std::vector<std::string>{"step-00000016.ckpt", "step-00000018.ckpt", "step-00000020.ckpt"});
}

TEST_CASE("truncated, corrupted, other-version and other-model checkpoints are refused, naming the file" *
          needs({Data::books})) {
    TempDir tmp;
    REQUIRE(run_recipe(tiny_pretrain(tmp.path() / "r", 1)).code == 0);
    const fs::path good = tmp.path() / "r" / "checkpoints" / "step-00000008.ckpt";
    const std::string bytes = read_text(good);
    auto variant = [&](const std::string& name, std::string content) {
        const fs::path p = tmp.path() / name;
        std::ofstream(p, std::ios::binary) << content;
        return p;
    };
    std::string flipped_data = bytes, flipped_header = bytes, version = bytes;
    flipped_data[flipped_data.size() - 100] ^= 0x40;
    flipped_header[40] ^= 0x01;
    version[8] = 9;  // the u32 format version after the magic
    struct Case {
        fs::path file;
        const char* message;
    };
    const Case cases[] = {
        {variant("truncated.ckpt", bytes.substr(0, bytes.size() / 2)), "truncated"},
        {variant("data.ckpt", flipped_data), "corrupted"},
        {variant("header.ckpt", flipped_header), "corrupted"},
        {variant("version.ckpt", version), "version 9"},
        {variant("empty.ckpt", ""), "empty.ckpt"},
        {tmp.path() / "r" / "model.ckpt", "not a training checkpoint"},
        {tmp.path() / "none.ckpt", "no such file or directory"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.file);
        auto args = tiny_pretrain(tmp.path() / ("out-" + c.file.filename().string()), 1);
        args.insert(args.end(), {"--resume", c.file.string()});
        auto r = run_recipe(args);
        CHECK(r.code == 2);
        CHECK(r.output.find(c.file.filename().string()) != std::string::npos);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK_FALSE(fs::exists(tmp.path() / ("out-" + c.file.filename().string())));  // nothing started
    }
    // Another model's checkpoint: wider, so its tensors do not fit.
    auto wider = tiny_pretrain(tmp.path() / "wider", 1);
    wider.insert(wider.end(), {"--set", "n_embd=32", "--resume", good.string()});
    auto w = run_recipe(wider);
    CHECK(w.code == 1);
    CHECK(w.output.find("a checkpoint of another model") != std::string::npos);
    // Another recipe's checkpoint.
    auto other = run(std::getenv("LEVERS_TEST_RECIPES_BIN"), {"run", "uneven", "--resume", good.string()});
    CHECK(other.code == 1);
    CHECK(other.output.find("written by recipe 'pretrain', not 'uneven'") != std::string::npos);
    CHECK(read_text(good) == bytes);  // nothing overwritten
}

TEST_CASE("evaluation counts every sample once on uneven shards, and early stopping ends all ranks together") {
    for (const char* gpus : {"1", "2", "3"}) {
        CAPTURE(gpus);
        TempDir tmp;
        auto r = run(std::getenv("LEVERS_TEST_RECIPES_BIN"),
                     {"run", "uneven", "--gpus", gpus, "--out", (tmp.path() / "u").string()});
        INFO(r.output);
        REQUIRE(r.code == 0);
        auto j = nlohmann::json::parse(last_line(r.output));
        CHECK(j["mean_value"] == 4.0);  // (1 + ... + 7) / 7, whatever the shards
        CHECK(j["samples"] == 7.0);
        CHECK(j["stopped_early"] == true);
        CHECK(j["steps"] == 6);  // evaluations at 2 (best), 4 and 6 (no gain twice)
        CHECK(j["ranks"] == std::stoi(gpus));
    }
}

TEST_CASE("recipe plot draws runs' curves to a PNG with gnuplot, and says what is missing" * needs({Data::books})) {
    TempDir tmp;
    REQUIRE(run_recipe(tiny_pretrain(tmp.path() / "a", 1)).code == 0);
    REQUIRE(run_recipe(tiny_pretrain(tmp.path() / "b", 1)).code == 0);
    const fs::path png = tmp.path() / "curves.png";
    auto r = run_recipe({"plot", (tmp.path() / "a").string(), (tmp.path() / "b").string(), "--out", png.string()});
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK(read_text(png).substr(0, 8) == "\x89PNG\r\n\x1a\n");
    auto no_metrics = run_recipe({"plot", tmp.path().string()});
    CHECK(no_metrics.code == 2);
    CHECK(no_metrics.output.find("no metrics.csv") != std::string::npos);
    auto no_gnuplot = run("/usr/bin/env", {"PATH=/nonexistent", std::getenv("LEVERS_RECIPE_BIN"), "plot",
                                            (tmp.path() / "a").string()});
    CHECK(no_gnuplot.code == 2);
    CHECK(no_gnuplot.output.find("apt-get install gnuplot-nox") != std::string::npos);
}

TEST_CASE("on a terminal the progress line is redrawn in place, by the rank or by the launcher for rank 0" *
          needs({Data::fashion_mnist})) {
    TempDir tmp;
    // `script` gives the run a terminal (util-linux, on every Debian system).
    auto on_terminal = [&](const std::string& args) {
        return run("/usr/bin/script", {"-qfec", std::string(std::getenv("LEVERS_RECIPE_BIN")) + " " + args, "/dev/null"});
    };
    auto one = on_terminal("run classify --set steps=1500 --set log_every=1500 --out " + (tmp.path() / "one").string());
    REQUIRE(one.code == 0);
    CHECK(one.output.find("\r\x1b[Kstep ") != std::string::npos);
    CHECK(one.output.find(" left") != std::string::npos);
    auto two = on_terminal("run classify --gpus 2 --set steps=1500 --set log_every=1500 --out " +
                           (tmp.path() / "two").string());
    REQUIRE(two.code == 0);
    CHECK(two.output.find("\r\x1b[K[rank 0] step ") != std::string::npos);
    CHECK(read_text(tmp.path() / "two" / "rank0.log").find('\x1e') == std::string::npos);  // not in the log
    // Without a terminal: plain lines only.
    auto plain = run_recipe({"run", "classify", "--set", "steps=300", "--out", (tmp.path() / "plain").string()});
    REQUIRE(plain.code == 0);
    CHECK(plain.output.find('\r') == std::string::npos);
    CHECK(plain.output.find(" left") == std::string::npos);
}
