// `recipe bench scaling|shapes|predict` on small settings, through the real binary.
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <fstream>
#include <sstream>

using namespace levers::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {


std::vector<std::string> lines_of(const fs::path& p) {
    std::ifstream in(p);
    std::vector<std::string> out;
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

std::vector<std::string> with_tiny(std::vector<std::string> args) { return concat(std::move(args), kTinyGpt); }

}  // namespace

TEST_CASE("bench scaling measures each GPU count and writes the table, CSV, Markdown and a plot" *
          needs({Data::books})) {
    TempDir tmp;
    auto [code, out] = run_recipe(with_tiny({"bench", "scaling", "pretrain", "--gpus", "1,2", "--steps", "12", "--warmup",
                                         "2", "--price", "0.68", "--out", (tmp.path() / "s").string()}));
    INFO(out);
    REQUIRE(code == 0);
    const auto csv = lines_of(tmp.path() / "s" / "scaling.csv");
    REQUIRE(csv.size() == 3);
    CHECK(csv[0] == "GPUs,tok/s,speedup,efficiency,step_ms,compute_ms,exposed_comm_ms,waiting_ms,hidden_comm_ms,"
                    "peak_mb_per_rank,hours,cost");
    CHECK(csv[1].starts_with("1,"));
    CHECK(csv[1].find(",1.00x,100%,") != std::string::npos);
    CHECK(csv[2].starts_with("2,"));
    CHECK(lines_of(tmp.path() / "s" / "scaling.md")[1].starts_with("|---|"));
    std::ifstream png(tmp.path() / "s" / "scaling.png", std::ios::binary);
    std::string magic(8, '\0');
    png.read(magic.data(), 8);
    CHECK(magic == "\x89PNG\r\n\x1a\n");
}

TEST_CASE("bench shapes runs K cells as a sweep and one K-GPU run of the same work" * needs({Data::books})) {
    TempDir tmp;
    auto [code, out] = run_recipe(with_tiny({"bench", "shapes", "pretrain", "--cells", "2", "--steps", "6", "--out",
                                         (tmp.path() / "h").string()}));
    INFO(out);
    REQUIRE(code == 0);
    const auto csv = lines_of(tmp.path() / "h" / "shapes.csv");
    REQUIRE(csv.size() == 4);
    CHECK(csv[1].starts_with("one cell alone,"));
    CHECK(csv[2].starts_with("2 cells as a sweep,"));
    CHECK(csv[3].starts_with("one 2-GPU run,"));
}

TEST_CASE("bench predict: given figures, measured ones, and the seeds' check" * needs({Data::books})) {
    TempDir tmp;
    auto [code, out] = run_recipe({"bench", "predict", "pretrain", "--profile", "nvlink-h100", "--gpus", "2,4", "--step-ms",
                               "100", "--grad-mb", "100", "--overlap", "0.5", "--out", (tmp.path() / "p").string()});
    INFO(out);
    REQUIRE(code == 0);
    const auto csv = lines_of(tmp.path() / "p" / "predict.csv");
    REQUIRE(csv.size() == 3);
    // 2 GPUs: 100 MiB over 360 GB/s once (2(n-1)/n = 1) plus 2 hops of 3 us = 0.297 ms, half of it exposed.
    CHECK(csv[1] == "2,0.30,0.15,100.15,2.00x,100%");

    auto measured = run_recipe(with_tiny({"bench", "predict", "pretrain", "--gpus", "2,4,8", "--out",
                                      (tmp.path() / "m").string()}));
    INFO(measured.output);
    CHECK(measured.code == 0);
    CHECK(lines_of(tmp.path() / "m" / "predict.csv").size() == 4);

    auto seeds = run_recipe({"bench", "predict", "--seeds"});
    CHECK(seeds.code == 0);
    CHECK(seeds.output.find("| 4 | 79 min (3.16x) | 79 min | 3.16x |") != std::string::npos);
}

TEST_CASE("bench refuses bad input with exit 2 before running anything") {
    struct Case {
        std::vector<std::string> args;
        const char* message;
    };
    const Case cases[] = {
        {{"bench", "scaling", "pretrain", "--gpus", "0"}, "--gpus '0': item 1 ('0') is not an integer >= 1"},
        {{"bench", "scaling", "classify", "--gpus", "1,,2"}, "--gpus '1,,2': item 2 (empty) is not an integer >= 1"},
        {{"bench", "predict", "classify", "--gpus", "2,"}, "--gpus '2,': item 2 (empty) is not an integer >= 1"},
        {{"bench", "scaling", "pretrain", "--steps", "5", "--warmup", "5"}, "--steps (5) must exceed --warmup (5)"},
        {{"bench", "scaling", "pretrian"}, "did you mean 'pretrain'"},
        {{"bench", "scaling", "lora_sweep", "--global-batch", "8"}, "declares no global_batch parameter"},
        {{"bench", "shapes", "pretrain", "--cells", "1"}, "--cells must be >= 2"},
        {{"bench", "predict", "pretrain", "--profile", "infiniband"}, "unknown interconnect profile 'infiniband'"},
        {{"bench", "predict"}, "needs a recipe name (or --seeds)"},
        {{"bench"}, "A subcommand is required"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.message);
        auto [code, out] = run_recipe(c.args);
        CHECK(code == 2);
        CHECK(out.find(c.message) != std::string::npos);
        CHECK(out.find("bench scaling pretrain:") == std::string::npos);
    }
}
