// `recipe plan` against what runs measure, --set micro_batch=auto, and the
// plan's bad input, through the real binary.
#include "tests/cli/run_metrics.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <regex>

using namespace levers::testing;
namespace fs = std::filesystem;

namespace {

// A small GPT whose activations outweigh its weights: a batch of 8 windows of 64.
const std::vector<std::string> kSmallGpt = {"--set", "n_layer=2", "--set", "n_embd=32", "--set", "n_head=2",
                                            "--set", "block_size=64", "--set", "batch_size=8", "--set", "eval_batches=1"};

// The "peak X MiB per rank" of a plan's "as configured" line, in MiB.
double planned_peak(const std::string& output) {
    std::smatch m;
    REQUIRE_MESSAGE(std::regex_search(output, m, std::regex(R"(peak ([0-9.]+) (MiB|GiB) per rank)")), output);
    return std::stod(m[1]) * (m[2] == "GiB" ? 1024 : 1);
}

std::vector<double> measured_peaks(const fs::path& run) {
    return nlohmann::json::parse(read_text(run / "result.json"))["peak_memory_mb"].get<std::vector<double>>();
}

std::vector<std::string> one_step(const fs::path& out, int gpus) {
    return {"run", "pretrain", "--gpus", std::to_string(gpus), "--threads", "1", "--out", out.string(), "--set",
            "steps=1", "--set", "eval_every=0", "--set", "sample_tokens=0", "--set", "checkpoint_every=0"};
}

}  // namespace

TEST_CASE("recipe plan predicts the tensor memory a run measures, per rank, for DDP, ZeRO-1, ZeRO-2 and "
          "checkpointing" * needs({Data::books})) {
    TempDir tmp;
    struct Case {
        int gpus;
        std::vector<std::string> sets;
    };
    const std::vector<Case> cases = {{1, {}},
                                     {1, {"--set", "checkpointing=true"}},
                                     {2, {"--set", "zero=1", "--set", "bucket_mb=0.01"}},
                                     {2, {"--set", "zero=2", "--set", "bucket_mb=0.01"}},
                                     {2, {"--set", "batch_size=16", "--set", "checkpointing=true"}}};
    int n = 0;
    for (const Case& c : cases) {
        CAPTURE(n);
        const auto plan = run_recipe(concat(concat({"plan", "pretrain", "--gpus", std::to_string(c.gpus)}, kSmallGpt), c.sets));
        INFO(plan.output);
        REQUIRE(plan.code == 0);
        CHECK(plan.output.find("optimizer state") != std::string::npos);
        CHECK(plan.output.find("largest micro-batch that fits") != std::string::npos);
        const fs::path out = tmp.path() / std::to_string(n++);
        const auto run = run_recipe(concat(concat(one_step(out, c.gpus), kSmallGpt), c.sets));
        INFO(run.output);
        REQUIRE(run.code == 0);
        const double predicted = planned_peak(plan.output);
        // Within 1% (the run and its trace make the same tensors, ZeRO-2's buckets included; the plan prints
        // tenths of a MiB).
        for (double measured : measured_peaks(out)) CHECK(std::abs(predicted - measured) <= 0.01 * measured + 0.05);
    }
}

TEST_CASE("--set micro_batch=auto takes the largest micro-batch that fits and keeps the samples per step" *
          needs({Data::books})) {
    TempDir tmp;
    // 64 windows per step and rank do not fit a rank of 24 MB; a divisor of 64 does, with grad_accum making up the rest.
    const auto plan = run_recipe(concat(concat({"plan", "pretrain", "--gpus", "2", "--memory", "24MB"}, kSmallGpt),
                                        {"--set", "batch_size=64"}));
    INFO(plan.output);
    REQUIRE(plan.code == 0);
    CHECK(plan.output.find("does NOT fit") != std::string::npos);
    const fs::path out = tmp.path() / "auto";
    const auto run = run_recipe(concat(concat(one_step(out, 2), kSmallGpt),
                                       {"--set", "batch_size=64", "--set", "micro_batch=auto", "--memory", "24MB"}));
    INFO(run.output);
    REQUIRE(run.code == 0);
    std::smatch m;
    REQUIRE(std::regex_search(run.output, m, std::regex(R"(micro_batch=auto: batch_size=([0-9]+) x grad_accum ([0-9]+))")));
    const long micro = std::stol(m[1]), accum = std::stol(m[2]);
    CHECK(micro < 64);
    CHECK(micro * accum == 64);
    for (double measured : measured_peaks(out)) CHECK(measured <= 21.6);  // within the usable nine tenths of 24 MB
    const auto config = nlohmann::json::parse(read_text(out / "config.json"));
    CHECK(config["params"]["batch_size"] == micro);
    // Every step trained the 2 x 64 windows of 64 tokens asked for.
    const auto result = nlohmann::json::parse(read_text(out / "result.json"));
    CHECK(result["steps"] == 1);
    CHECK(read_text(out / "rank0.log").find("batch " + std::to_string(micro) + " x 64 per rank") != std::string::npos);
}

TEST_CASE("recipe plan and micro_batch=auto refuse bad input before anything starts") {
    TempDir tmp;
    struct Case {
        std::vector<std::string> args;
        const char* says;
    };
    const std::vector<Case> cases = {
        {{"plan", "pretrain", "--memory", "lots"}, "--memory lots: give a size such as 80GB"},
        {{"plan", "pretrain", "--gpus", "0"}, "--gpus must be >= 1"},
        {{"plan", "nosuch"}, "nosuch"},
        {{"plan", "eval_lm"}, "eval_lm"},
        {{"run", "pretrain", "--memory", "8GB", "--out", (tmp.path() / "m").string()}, "--set micro_batch=auto"},
        {{"run", "pretrain", "--set", "micro_batch=auto", "--memory", "1MB", "--out", (tmp.path() / "tiny").string()},
         "not even a micro-batch of 1 fits"},
    };
    for (const Case& c : cases) {
        CAPTURE(c.says);
        const auto r = run_recipe(c.args);
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output.find(c.says) != std::string::npos);
    }
    CHECK(!fs::exists(tmp.path() / "m"));
    CHECK(!fs::exists(tmp.path() / "tiny"));
}
