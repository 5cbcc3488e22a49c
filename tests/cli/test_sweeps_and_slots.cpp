// Sweeps, the slot ledger and workspace settings, through the real binaries.
#include "tests/process.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>

using namespace levers::testing;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const char* test_bin() { return std::getenv("LEVERS_TEST_RECIPES_BIN"); }

// Runs the test-recipes binary to its end.
Ran run_tests_bin(const std::vector<std::string>& args, const std::vector<std::string>& env) {
    return run_program(test_bin(), args, env);
}

// Waits until `text` appears in a background program's output.
bool wait_for_output(const Background& b, const std::string& text, std::chrono::milliseconds limit = 20s) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        if (b.output().find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

nlohmann::json read_json(const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("a run directory holds the resolved config, each rank's log and the result") {
    TempDir tmp;
    auto [code, out] = run_tests_bin({"run", "hold", "--set", "value=7", "--out", (tmp.path() / "one").string()}, {});
    REQUIRE(code == 0);
    CHECK(read_json(tmp.path() / "one" / "config.json")["params"]["value"] == 7);
    CHECK(read_json(tmp.path() / "one" / "result.json")["double"] == 14);
    std::ifstream log(tmp.path() / "one" / "rank0.log");
    std::string text((std::istreambuf_iterator<char>(log)), {});
    CHECK(text.find("holding for 0.2 s") != std::string::npos);

    auto two = run_tests_bin({"run", "hold", "--gpus", "2", "--out", (tmp.path() / "two").string()}, {});
    REQUIRE(two.code == 0);
    CHECK(fs::exists(tmp.path() / "two" / "rank0.log"));
    CHECK(fs::exists(tmp.path() / "two" / "rank1.log"));
    // An --out that already holds files is refused before anything runs.
    auto again = run_tests_bin({"run", "hold", "--out", (tmp.path() / "one").string()}, {});
    CHECK(again.code == 2);
    CHECK(again.output.find("exists and is not an empty directory") != std::string::npos);
}

TEST_CASE("a sweep runs every cell, reports a failing one without stopping the others, and queues on busy slots") {
    TempDir tmp;
    // One slot: cells run one after another.
    auto [code, out] = run_tests_bin({"sweep", "hold", "--grid", "value=1,2", "--grid", "fail=false,true", "--out",
                                      (tmp.path() / "s").string(), "--set", "seconds=0.1"},
                                     {"LEVERS_CPU_SLOTS=1"});
    INFO(out);
    CHECK(code == 1);  // the two cells with fail=true failed
    CHECK(out.find("2 of 4 cells succeeded") != std::string::npos);
    CHECK(out.find("FAILED (exit 1)") != std::string::npos);
    CHECK(out.find("asked to fail (value 2)") != std::string::npos);
    CHECK(out.find("sweep: cell 00 finished") < out.find("sweep: cell 01 started"));
    auto cells = read_json(tmp.path() / "s" / "sweep.json");
    REQUIRE(cells.size() == 4);
    CHECK(cells[0]["status"] == "ok");
    CHECK(cells[0]["result"]["double"] == 2);
    CHECK(cells[1]["status"] == "failed");
    CHECK(fs::exists(cells[1]["log"].get<std::string>()));
    CHECK(cells[2]["result"]["double"] == 4);
    std::ifstream csv(tmp.path() / "s" / "sweep.csv");
    std::string header;
    std::getline(csv, header);
    CHECK(header == "cell,fail,value,status,wall_s,double,returned");

    // Two slots: both cells of a grid start at once.
    auto both = run_tests_bin({"sweep", "hold", "--grid", "value=1,2", "--out", (tmp.path() / "p").string()},
                              {"LEVERS_CPU_SLOTS=2"});
    CHECK(both.code == 0);
    CHECK(both.output.find("sweep: cell 01 started") < both.output.find("sweep: cell 00 finished"));
}

TEST_CASE("two jobs never share a slot: the second waits, or fails with --no-wait, naming the holder") {
    TempDir tmp;
    const std::vector<std::string> env = {"LEVERS_CPU_SLOTS=1"};
    auto first = start_program(test_bin(), {"run", "hold", "--set", "seconds=2", "--out", (tmp.path() / "a").string()},
                               env);
    REQUIRE(wait_for_output(first, "holding for"));

    auto refused = run_tests_bin({"run", "hold", "--no-wait", "--out", (tmp.path() / "b").string()}, env);
    CHECK(refused.code == 1);
    CHECK(refused.output.find(fmt::format("slot 0: job 'hold' (pid {})", first.pid)) != std::string::npos);
    CHECK(refused.output.find("--no-wait") != std::string::npos);
    CHECK_FALSE(fs::exists(tmp.path() / "b"));  // nothing started

    auto second = start_program(test_bin(), {"run", "hold", "--out", (tmp.path() / "c").string()}, env);
    REQUIRE(wait_for_output(second, "waiting for 1 CPU slot"));
    auto status = run_tests_bin({"status"}, env);
    CHECK(status.output.find(fmt::format("slot 0: job 'hold' (pid {})", first.pid)) != std::string::npos);
    CHECK(status.output.find(fmt::format("job 'hold' (pid {}) needs 1 slots", second.pid)) != std::string::npos);
    auto done = second.wait(30s);
    REQUIRE(done.has_value());
    CHECK(WEXITSTATUS(*done) == 0);
    CHECK(first.wait(1s).has_value());  // the first ended before the second could start
    const std::string out = second.output();
    CHECK(out.find("waiting for") == out.rfind("waiting for"));  // said once
}

TEST_CASE("a killed holder's slot frees itself") {
    TempDir tmp;
    const std::vector<std::string> env = {"LEVERS_CPU_SLOTS=1"};
    auto holder = start_program(test_bin(), {"run", "hold", "--set", "seconds=60", "--out", (tmp.path() / "a").string()},
                                env);
    REQUIRE(wait_for_output(holder, "holding for"));
    ::kill(holder.pid, SIGKILL);
    REQUIRE(holder.wait(5s).has_value());
    auto next = run_tests_bin({"run", "hold", "--no-wait", "--out", (tmp.path() / "b").string()}, env);
    CHECK(next.code == 0);
}

TEST_CASE("workspace settings refuse multi-GPU jobs, naming the command that allows them; variables win") {
    TempDir tmp;
    const std::string config = "XDG_CONFIG_HOME=" + tmp.path().string();
    CHECK(run_tests_bin({"workspace", "multi-gpu", "off"}, {config}).code == 0);
    auto refused = run_tests_bin({"run", "hold", "--gpus", "2"}, {config});
    CHECK(refused.code == 2);
    CHECK(refused.output.find("turn them on with: recipe workspace multi-gpu on") != std::string::npos);
    auto overridden = run_tests_bin({"run", "hold", "--gpus", "2", "--out", (tmp.path() / "o").string()},
                                    {config, "LEVERS_MULTI_GPU=on"});
    CHECK(overridden.code == 0);

    CHECK(run_tests_bin({"workspace", "multi-gpu", "on"}, {config}).code == 0);
    CHECK(run_tests_bin({"workspace", "max-gpus", "2"}, {config}).code == 0);
    auto too_many = run_tests_bin({"run", "hold", "--gpus", "3"}, {config});
    CHECK(too_many.code == 2);
    CHECK(too_many.output.find("at most 2 GPUs") != std::string::npos);
    CHECK(too_many.output.find("recipe workspace max-gpus 3") != std::string::npos);
    auto bad = run_tests_bin({"workspace", "max-gpus", "zero"}, {config});
    CHECK(bad.code == 2);
    CHECK(bad.output.find("'zero' is not a GPU count") != std::string::npos);
    auto env_bad = run_tests_bin({"run", "hold"}, {config, "LEVERS_MAX_GPUS=-3"});
    CHECK(env_bad.code == 2);
    CHECK(env_bad.output.find("LEVERS_MAX_GPUS") != std::string::npos);
}

TEST_CASE("a user's binary's help names that binary and its own recipes") {
    auto top = run_tests_bin({"--help"}, {});
    CHECK(top.code == 0);
    CHECK(top.output.find("Usage: levers_test_recipes") != std::string::npos);
    CHECK(top.output.find("Its recipes: collectives, cpu_op, fds, gpu_order,") != std::string::npos);
    CHECK(top.output.find("levers_test_recipes run collectives --gpus 2") != std::string::npos);
    auto run = run_tests_bin({"run", "--help"}, {});
    CHECK(run.output.find("levers_test_recipes run collectives") != std::string::npos);
    for (const auto& help : {top.output, run.output}) {
        CHECK(help.find("pretrain") == std::string::npos);
        CHECK(help.find("classify") == std::string::npos);
        CHECK(help.find("recipe run") == std::string::npos);
    }
}
