// `recipe run --gpus N`: real rank processes under the real launcher.
#include "levers/core/threads.hpp"
#include "tests/process.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>

using namespace levers::testing;
using namespace std::chrono_literals;

namespace {

// A GPT small enough that 20 steps take a fraction of a second, with enough
// learning rate that the parameters move far from their start.
std::vector<std::string> tiny_pretrain(int gpus, int batch, int accum, int steps = 20, double bucket_mb = 25) {
    return {"run", "pretrain", "--gpus", std::to_string(gpus), "--threads", "1", "--output", "rank0",
            "--set", "bucket_mb=" + std::to_string(bucket_mb),
            "--set", "steps=" + std::to_string(steps), "--set", "batch_size=" + std::to_string(batch),
            "--set", "grad_accum=" + std::to_string(accum), "--set", "n_layer=2", "--set", "n_embd=32",
            "--set", "n_head=2", "--set", "block_size=32", "--set", "eval_batches=4", "--set", "sample_tokens=0",
            "--set", "log_every=10", "--set", "eval_every=0", "--set", "warmup=2", "--set", "lr=3e-3"};
}

nlohmann::json result_of(const Background& b) { return nlohmann::json::parse(last_line(b.output())); }

nlohmann::json run_to_end(const std::vector<std::string>& args) {
    auto b = start_recipe(args);
    auto status = b.wait(120s);
    REQUIRE(status.has_value());
    INFO(b.output());
    REQUIRE((WIFEXITED(*status) && WEXITSTATUS(*status) == 0));
    return result_of(b);
}

// Starts a long job and waits until its ranks are training.
Background start_long_job(int gpus, std::vector<std::string> extra = {}) {
    auto args = tiny_pretrain(gpus, 2, 1, 1000000);
    args.insert(args.end(), extra.begin(), extra.end());
    auto b = start_recipe(args);
    const auto until = std::chrono::steady_clock::now() + 30s;
    // A progress line ("[rank 0] step ..."): every rank has joined and is training.
    while (b.output().find("] step ") == std::string::npos && std::chrono::steady_clock::now() < until)
        std::this_thread::sleep_for(20ms);
    return b;
}

}  // namespace

TEST_CASE("N ranks of batch b train like one rank of batch N*b, with and without accumulation" * needs({Data::books})) {
    struct Case {
        int gpus, batch, accum;
        double bucket_mb = 25;  // one bucket; 0.01 MiB cuts the 136 KiB of gradients into 14
    };
    const auto reference = run_to_end(tiny_pretrain(1, 4, 1));
    const auto reference_accum = run_to_end(tiny_pretrain(1, 8, 1));
    for (Case c : {Case{2, 2, 1}, Case{4, 1, 1}, Case{2, 2, 2}, Case{4, 1, 2}, Case{2, 2, 1, 0.01}, Case{4, 1, 2, 0.01}}) {
        CAPTURE(c.gpus);
        CAPTURE(c.accum);
        CAPTURE(c.bucket_mb);
        const auto& expect = c.accum == 1 ? reference : reference_accum;
        const auto got = run_to_end(tiny_pretrain(c.gpus, c.batch, c.accum, 20, c.bucket_mb));
        CHECK(got["steps"] == 20);
        // Only the order of float sums differs: the ranks' mean of means against one mean.
        CHECK(got["loss"].get<double>() == doctest::Approx(expect["loss"].get<double>()).epsilon(1e-6));
        CHECK(got["val_loss"].get<double>() == doctest::Approx(expect["val_loss"].get<double>()).epsilon(1e-4));
        CHECK(got["loss"].get<double>() < 4.3);  // it learned: 20 steps from log(256) = 5.5
    }
}

TEST_CASE("a fixed global batch gives the same training on any GPU count, and must split evenly" *
          needs({Data::books})) {
    auto with_global = [](int gpus, int global) {
        auto args = tiny_pretrain(gpus, 1, 1);
        args.insert(args.end(), {"--set", "global_batch=" + std::to_string(global)});
        return args;
    };
    const auto one = run_to_end(with_global(1, 4));
    for (int gpus : {2, 4}) {
        CAPTURE(gpus);
        const auto many = run_to_end(with_global(gpus, 4));
        CHECK(many["loss"].get<double>() == doctest::Approx(one["loss"].get<double>()).epsilon(1e-6));
    }
    auto uneven = start_recipe(with_global(4, 6));
    auto status = uneven.wait(60s);
    REQUIRE(status.has_value());
    CHECK(WEXITSTATUS(*status) == 1);
    CHECK(uneven.output().find("global_batch 6 does not split evenly over 4 ranks") != std::string::npos);
}

TEST_CASE("every rank's output is forwarded with its prefix; --output rank0 shows rank 0's alone") {
    for (std::string shown : {"all", "rank0"}) {
        CAPTURE(shown);
        auto args = tiny_pretrain(2, 2, 1, 4);
        args[7] = shown;  // --output
        args.insert(args.end(), {"--set", "corpus=/nonexistent/books"});  // every rank prints an error
        auto b = start_recipe(args);
        auto status = b.wait(60s);
        REQUIRE(status.has_value());
        CHECK(WEXITSTATUS(*status) == 1);
        const auto out = b.output();
        CHECK(out.find("recipe pretrain: 2 CPU ranks") != std::string::npos);
        // Whichever rank fails first stops the other, so either may be the one reported.
        const bool rank0_failed = out.find("[rank 0] error: rank 0: recipe pretrain failed") != std::string::npos;
        const bool rank1_failed = out.find("[rank 1] error: rank 1: recipe pretrain failed") != std::string::npos;
        CHECK((rank0_failed || rank1_failed || shown == "rank0"));
        if (shown == "rank0") CHECK(out.find("[rank 1]") == std::string::npos);
        CHECK(out.find("levers: job failed: rank") != std::string::npos);
        CHECK(out.find("/nonexistent/books: no such file") != std::string::npos);  // in the report's last lines
    }
}

TEST_CASE("kill -9 of a rank ends the job within 2 s, naming the rank, leaving no process or segment" *
          needs({Data::books})) {
    for (int victim : {0, 1}) {
        CAPTURE(victim);
        auto job = start_long_job(2);
        auto ranks = children_of(job.pid);
        REQUIRE(ranks.size() == 2);
        std::sort(ranks.begin(), ranks.end());  // spawned in rank order
        const auto killed_at = std::chrono::steady_clock::now();
        ::kill(ranks[static_cast<std::size_t>(victim)], SIGKILL);
        auto status = job.wait(2s);
        const auto took = std::chrono::steady_clock::now() - killed_at;
        INFO(job.output());
        REQUIRE(status.has_value());
        CHECK(took < 2s);
        CHECK(WEXITSTATUS(*status) == 1);
        CHECK(job.output().find("rank " + std::to_string(victim) + " was killed by signal 9 (SIGKILL)") !=
              std::string::npos);
        for (pid_t p : ranks) CHECK_FALSE(alive(p));
        CHECK(segments_of(job.pid).empty());
    }
}

TEST_CASE("a stopped rank (SIGSTOP) is named with its last collective and the job is stopped" * needs({Data::books})) {
    // Short, but long enough for a loaded machine to start both ranks.
    auto job = start_long_job(2, {"--timeout", "3"});
    auto ranks = children_of(job.pid);
    REQUIRE(ranks.size() == 2);
    std::sort(ranks.begin(), ranks.end());
    ::kill(ranks[1], SIGSTOP);
    auto status = job.wait(10s);  // the 3 s collective timeout, then the grace period
    INFO(job.output());
    REQUIRE(status.has_value());
    CHECK(WEXITSTATUS(*status) == 1);
    CHECK(job.output().find("for rank 1 (last in ") != std::string::npos);
    // The verdict names the stalled rank, not rank 0, which gave up waiting for it.
    CHECK(job.output().find("levers: job failed: rank 1 stalled in a collective, stopped (SIGSTOP): rank 0 waited "
                            "3000 ms in ") != std::string::npos);
    CHECK(job.output().find("job failed: rank 0") == std::string::npos);
    for (pid_t p : ranks) CHECK_FALSE(alive(p));
    CHECK(segments_of(job.pid).empty());
}

TEST_CASE("Ctrl-C and SIGTERM stop every rank and remove the segment" * needs({Data::books})) {
    for (int sig : {SIGINT, SIGTERM}) {
        CAPTURE(sig);
        auto job = start_long_job(2);
        auto ranks = children_of(job.pid);
        REQUIRE(ranks.size() == 2);
        ::kill(job.pid, sig);
        auto status = job.wait(5s);
        REQUIRE(status.has_value());
        CHECK(WEXITSTATUS(*status) == 128 + sig);
        CHECK(job.output().find(sig == SIGINT ? "SIGINT received" : "SIGTERM received") != std::string::npos);
        for (pid_t p : ranks) CHECK_FALSE(alive(p));
        CHECK(segments_of(job.pid).empty());
    }
}

TEST_CASE("a killed launcher takes its ranks with it; its segment is swept by the next job" * needs({Data::books})) {
    auto job = start_long_job(2);
    auto ranks = children_of(job.pid);
    REQUIRE(ranks.size() == 2);
    ::kill(job.pid, SIGKILL);
    REQUIRE(job.wait(2s).has_value());
    const auto until = std::chrono::steady_clock::now() + 2s;
    auto any_alive = [&] { return alive(ranks[0]) || alive(ranks[1]); };
    while (any_alive() && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(10ms);
    CHECK_FALSE(any_alive());
    CHECK(segments_of(job.pid).size() == 1);  // nobody could remove it...
    run_to_end(tiny_pretrain(2, 1, 1, 1));
    CHECK(segments_of(job.pid).empty());  // ...until the next launch swept it
}

TEST_CASE("bad GPU counts are refused before anything starts") {
    for (std::string n : {"0", "-3"}) {
        auto bad = start_recipe({"run", "pretrain", "--gpus", n});
        auto status = bad.wait(10s);
        REQUIRE(status.has_value());
        CHECK(WEXITSTATUS(*status) == 2);
        CHECK(bad.output().find("--gpus must be >= 1, got " + n) != std::string::npos);
    }
}

TEST_CASE("torchrun-style: workers started by hand with the env variables join each other and train" *
          needs({Data::books})) {
    const std::string port = std::to_string(29700 + getpid() % 200);
    auto worker = [&](int rank, const std::string& token) {
        auto args = tiny_pretrain(1, 2, 1);
        args.erase(args.begin() + 2, args.begin() + 4);  // no --gpus: the environment says where this rank stands
        return start_recipe(args, {"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(rank),
                                   "LOCAL_WORLD_SIZE=2", "MASTER_ADDR=localhost", "MASTER_PORT=" + port,
                                   "LEVERS_JOB_TOKEN=" + token});
    };
    const auto expect = run_to_end(tiny_pretrain(2, 2, 1));
    {
        auto rank1 = worker(1, "secret");
        auto rank0 = worker(0, "secret");
        auto s0 = rank0.wait(60s), s1 = rank1.wait(60s);
        INFO(rank0.output());
        INFO(rank1.output());
        REQUIRE((s0.has_value() && s1.has_value()));
        CHECK(WEXITSTATUS(*s0) == 0);
        CHECK(WEXITSTATUS(*s1) == 0);
        CHECK(rank0.output().find("rank 0 of 2 started by torchrun") != std::string::npos);
        CHECK(result_of(rank0)["loss"] == expect["loss"]);
        CHECK(result_of(rank0)["val_loss"].get<double>() == doctest::Approx(expect["val_loss"].get<double>()));
        CHECK(rank1.output().find("{\"loss\"") == std::string::npos);  // only rank 0 prints the result
    }
    {
        // A worker of another job (wrong token) is refused by rank 0's store.
        auto rank0 = worker(0, "secret");
        auto intruder = worker(1, "guess");
        auto si = intruder.wait(30s);
        REQUIRE(si.has_value());
        CHECK(WEXITSTATUS(*si) == 1);
        CHECK(intruder.output().find("refused this rank: wrong job token") != std::string::npos);
        ::kill(rank0.pid, SIGKILL);  // it was waiting for the refused rank
        rank0.wait(5s);
        CHECK(segments_of(rank0.pid).size() == 1);
        run_to_end(tiny_pretrain(2, 1, 1, 1));  // the next job sweeps what the killed rank 0 left
        CHECK(segments_of(rank0.pid).empty());
    }
}

TEST_CASE("ranks of an external launcher take --threads as levers' own do, else the node's cores shared") {
    const std::string port = std::to_string(29500 + getpid() % 200);
    for (const std::string threads : {"0", "2"}) {
        CAPTURE(threads);
        std::vector<Background> ranks;
        for (int r : {1, 0})
            ranks.push_back(start_program(std::getenv("LEVERS_TEST_RECIPES_BIN"),
                                          {"run", "rank_env", "--threads", threads},
                                          {"RANK=" + std::to_string(r), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(r),
                                           "LOCAL_WORLD_SIZE=2", "MASTER_PORT=" + port}));
        for (auto& b : ranks) REQUIRE(b.wait(60s).has_value());
        INFO(ranks[1].output());
        const auto got = result_of(ranks[1]);
        const int want = threads == "0" ? std::max(1, levers::available_cores() / 2) : 2;
        for (const auto& r : got["ranks"]) CHECK(r[4].get<double>() == want);
    }
}

TEST_CASE("an external launch that levers cannot join says why") {
    auto args = tiny_pretrain(1, 2, 1);
    args.erase(args.begin() + 2, args.begin() + 4);
    struct Case {
        std::vector<std::string> env;
        const char* message;
    };
    const Case cases[] = {
        {{"RANK=0", "WORLD_SIZE=2", "MASTER_PORT=0"}, "MASTER_PORT='0' must be an integer >= 1"},
        {{"RANK=1", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "LOCAL_RANK=0", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29999"},
         "rank 1: a job across nodes needs its ranks numbered node by node, as many on each (rank = node x 2 + local "
         "rank; got local rank 0 of 2 in a world of 4)"},
        {{"RANK=0", "WORLD_SIZE=4", "LOCAL_WORLD_SIZE=2", "LOCAL_RANK=0", "LEVERS_NODE_ALLREDUCE=ring"},
         "LEVERS_NODE_ALLREDUCE=ring: expected hierarchical (the default) or flat"},
        {{"RANK=2", "WORLD_SIZE=2"}, "RANK=2 must be below WORLD_SIZE=2"},
        {{"SLURM_PROCID=0", "SLURM_NTASKS=x"}, "SLURM_NTASKS='x' must be an integer"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.message);
        auto b = start_recipe(args, c.env);
        auto status = b.wait(30s);
        REQUIRE(status.has_value());
        CHECK(WEXITSTATUS(*status) != 0);
        CHECK(b.output().find(c.message) != std::string::npos);
        CHECK(b.output().find(".cpp:") == std::string::npos);  // no source location in a line for users
    }
}

namespace {
// Runs a recipe of the test binary (tests/cli/probe_recipes.cpp) on `gpus` ranks.
nlohmann::json test_recipe(const std::string& name, int gpus, std::vector<std::string> sets = {},
                           std::vector<std::string> env = {}) {
    std::vector<std::string> args = {"run", name, "--gpus", std::to_string(gpus), "--threads", "1"};
    for (const auto& s : sets) args.insert(args.end(), {"--set", s});
    auto b = start_program(std::getenv("LEVERS_TEST_RECIPES_BIN"), args, env);
    auto status = b.wait(120s);
    INFO(b.output());
    REQUIRE(status.has_value());
    REQUIRE(WEXITSTATUS(*status) == 0);
    return result_of(b);
}
}  // namespace

TEST_CASE("every collective through the real launcher, 1 to 4 ranks, awkward lengths") {
    for (int gpus = 1; gpus <= 4; ++gpus) {
        CAPTURE(gpus);
        CHECK(test_recipe("collectives", gpus)["ok"] == true);
    }
}

TEST_CASE("ranks hold no file descriptor beyond stdin, stdout and stderr") {
    for (int gpus : {2, 4}) {
        CAPTURE(gpus);
        auto got = test_recipe("fds", gpus);
        INFO(got.dump());
        CHECK(got["extra_fds"] == 0);
    }
}

TEST_CASE("ranks number GPUs in PCI order, as the slot ledger does, unless the user chose an order") {
    CHECK(test_recipe("gpu_order", 2)["cuda_device_order"] == "PCI_BUS_ID");
    CHECK(test_recipe("gpu_order", 2, {}, {"CUDA_DEVICE_ORDER=FASTEST_FIRST"})["cuda_device_order"] ==
          "FASTEST_FIRST");
}

TEST_CASE("the shared-memory store: set, get (waiting), add, on 2 and 4 ranks") {
    for (int gpus : {2, 4}) {
        CAPTURE(gpus);
        CHECK(test_recipe("store", gpus)["ok"] == true);
    }
}

TEST_CASE("dist::wrap trains like one rank, with and without accumulation, in one bucket or many") {
    const auto one = test_recipe("wrapped", 1);
    const auto one_accum = test_recipe("wrapped", 1, {"grad_accum=2"});
    for (int gpus : {2, 4}) {
        for (const char* bucket : {"bucket_bytes=256", "bucket_bytes=100000000"}) {
            CAPTURE(gpus);
            CAPTURE(bucket);
            auto got = test_recipe("wrapped", gpus, {bucket});
            CHECK(got["param_norm"].get<double>() == doctest::Approx(one["param_norm"].get<double>()).epsilon(1e-6));
            CHECK(got["loss"].get<double>() == doctest::Approx(one["loss"].get<double>()).epsilon(1e-6));
            auto accum = test_recipe("wrapped", gpus, {bucket, "grad_accum=2"});
            CHECK(accum["param_norm"].get<double>() ==
                  doctest::Approx(one_accum["param_norm"].get<double>()).epsilon(1e-6));
        }
    }
}
