#include "framework/recipe/cli.hpp"

#include "framework/core/error.hpp"
#include "framework/core/threads.hpp"
#include "framework/dist/context.hpp"
#include "framework/dist/shm_segment.hpp"
#include "framework/launch/env_contract.hpp"
#include "framework/launch/job_segment.hpp"
#include "framework/launch/launcher.hpp"
#include "framework/launch/rendezvous.hpp"
#include "framework/recipe/recipe.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>

namespace levers {

namespace {

constexpr const char* kVersion = "levers 0.1.0";

constexpr const char* kExamples = R"(
Examples:
  recipe list                                  every recipe and what it does
  recipe show pretrain                         its parameters, defaults and help
  recipe run pretrain                          GPT on the book corpus (CPU)
  recipe run pretrain --set steps=2000 --set lr=1e-3
  recipe run classify --threads 1              MLP on Fashion-MNIST, one thread
  recipe run pretrain --gpus 4                 4 ranks, gradients averaged)";

int list_recipes() {
    for (const auto& name : recipe_names()) {
        Recipe r = find_recipe(name);
        fmt::print("{:<12} {}\n", name, r.description());
        std::string params;
        for (const auto& p : r.params()) params += fmt::format(" {}={}", p.name, to_text(p.default_value));
        fmt::print("{:<12} params:{}\n", "", params);
    }
    return 0;
}

int show_recipe(const std::string& name) {
    Recipe r = find_recipe(name);
    fmt::print("{}: {}\ndefault cards: {}\nparameters (set with --set name=value):\n", r.name(), r.description(),
               r.default_gpus());
    for (const auto& p : r.params())
        fmt::print("  {:<16} {:<8} {:<14} {}\n", p.name, type_name(p.default_value), to_text(p.default_value), p.help);
    return 0;
}

Config resolve_config(const Recipe& r, const std::vector<std::string>& sets) {
    Config cfg = r.defaults();
    for (const auto& kv : sets) {
        auto eq = kv.find('=');
        LEVERS_CHECK(eq != std::string::npos && eq > 0, "--set expects name=value, got '{}'", kv);
        cfg.set(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return cfg;
}

struct RunFlags {
    std::string name;
    std::vector<std::string> sets;
    int threads = 0;
    int gpus = -1;  // unset: the recipe's default
    std::string device = "auto";
    std::string output = "all";
    double timeout_s = 120;
};

void print_result(const Result& result) {
    // Generated text can hold any bytes: replace invalid UTF-8 rather than fail.
    fmt::print("{}\n", result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// Runs the recipe as one rank of `group` (none: a world of one) with `threads`
// CPU threads; `publish` receives rank 0's result.
int run_in_group(const Recipe& r, const Config& cfg, const launch::RankEnv& env,
                 std::unique_ptr<dist::ShmBackend> group, int threads,
                 const std::function<void(const Result&)>& publish) {
    try {
        dist::join({env.rank, env.world_size, env.local_rank, env.local_world_size}, std::move(group));
        set_threads(threads);
        Result result = r.body()(cfg);
        if (dist::is_main()) publish(result);
        dist::leave();
    } catch (const std::exception& e) {
        dist::leave();
        const std::string who = env.world_size > 1 ? fmt::format("rank {}: ", env.rank) : std::string();
        fmt::print(stderr, "error: {}recipe {} failed: {}\n", who, r.name(), e.what());
        return 1;
    }
    return 0;
}

// A rank's threads: as the launcher said, else the node's cores shared among its ranks.
int rank_threads(const launch::RankEnv& env) {
    return env.threads > 0 ? env.threads : std::max(1, available_cores() / env.local_world_size);
}

std::chrono::milliseconds collective_timeout(const launch::RankEnv& env, double flag_seconds) {
    return std::chrono::milliseconds(env.timeout_ms > 0 ? env.timeout_ms : static_cast<long>(flag_seconds * 1000));
}

// This process is one rank of a job levers' launcher started: the result goes
// back through the segment, and the launcher prints it.
int run_as_launched_rank(const Recipe& r, const Config& cfg, const launch::RankEnv& env, double timeout_s) {
    std::optional<dist::ShmSegment> segment;
    std::unique_ptr<dist::ShmBackend> group;
    try {
        segment = dist::ShmSegment::open(env.segment);
        group = std::make_unique<dist::ShmBackend>(launch::JobSegment::group_memory(segment->data()),
                                                   launch::JobSegment::group_bytes(segment->size()), env.rank,
                                                   collective_timeout(env, timeout_s));
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: rank {}: cannot join the job: {}\n", env.rank, e.what());
        return 1;
    }
    return run_in_group(r, cfg, env, std::move(group), rank_threads(env), [&](const Result& result) {
        launch::JobSegment::write_result(segment->data(),
                                         result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    });
}

// This process is one rank of a job torchrun, Slurm or mpirun started: rank 0 prints the result.
int run_as_external_rank(const Recipe& r, const Config& cfg, const launch::RankEnv& env, double timeout_s) {
    std::optional<launch::JoinedGroup> joined;
    try {
        joined = launch::join_external(env, collective_timeout(env, timeout_s));
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: rank {}: cannot join the job: {}\n", env.rank, e.what());
        return 1;
    }
    if (env.rank == 0)
        fmt::print("recipe {}: rank 0 of {} started by {}, joined through shared memory\n", r.name(), env.world_size,
                   env.source);
    return run_in_group(r, cfg, env, std::move(joined->backend), rank_threads(env), print_result);
}

int run_recipe(const RunFlags& flags, int argc, char** argv) {
    Recipe r = find_recipe(flags.name);
    Config cfg = resolve_config(r, flags.sets);
    LEVERS_CHECK(flags.threads >= 0, "--threads must be >= 0 (0: the cores shared among ranks), got {}", flags.threads);
    LEVERS_CHECK(flags.timeout_s > 0, "--timeout must be > 0 seconds, got {}", flags.timeout_s);
    const auto env = launch::read_rank_env();
    if (env.source == "levers") return run_as_launched_rank(r, cfg, env, flags.timeout_s);
    if (env.distributed()) return run_as_external_rank(r, cfg, env, flags.timeout_s);
    const int gpus = flags.gpus == -1 ? r.default_gpus() : flags.gpus;
    LEVERS_CHECK(gpus >= 1, "--gpus must be >= 1, got {}", gpus);
    LEVERS_CHECK(flags.device != "cuda", "--device cuda: this build has no CUDA backend yet; use --device cpu");

    if (gpus == 1) {
        const int n = flags.threads == 0 ? available_cores() : flags.threads;
        fmt::print("recipe {}: 1 CPU process, {} thread{}\n", r.name(), n, n == 1 ? "" : "s");
        std::fflush(stdout);
        return run_in_group(r, cfg, env, nullptr, n, print_result);
    }
    launch::LaunchOptions options;
    options.program = std::filesystem::read_symlink("/proc/self/exe").string();
    options.args.assign(argv + 1, argv + argc);
    options.ranks = gpus;
    options.threads_per_rank = flags.threads > 0 ? flags.threads : std::max(1, available_cores() / gpus);
    options.timeout = std::chrono::milliseconds(static_cast<long>(flags.timeout_s * 1000));
    options.all_output = flags.output == "all";
    fmt::print("recipe {}: {} CPU ranks (no CUDA backend in this build), {} thread{} each\n", r.name(), gpus,
               options.threads_per_rank, options.threads_per_rank == 1 ? "" : "s");
    std::fflush(stdout);
    auto outcome = launch::launch(options);
    if (outcome.exit_code == 0 && outcome.result) print_result(Result::parse(*outcome.result));
    return outcome.exit_code;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app("levers: train neural networks on 1 to 8 cards from C++, with recipes written in C++.", "recipe");
    app.set_version_flag("--version", kVersion);
    app.require_subcommand(1);
    app.footer(kExamples);

    auto* list = app.add_subcommand("list", "Show every registered recipe with its description and parameters");
    std::string show_name;
    auto* show = app.add_subcommand("show", "Show one recipe's parameters, types, defaults and help");
    show->add_option("name", show_name, "recipe name")->required();

    RunFlags flags;
    auto* run = app.add_subcommand("run", "Run a recipe and print its result as JSON on the last line");
    run->add_option("name", flags.name, "recipe name")->required();
    run->add_option("--set", flags.sets, "set a parameter: --set name=value (repeatable)");
    run->add_option("--gpus", flags.gpus, "cards, one rank each (default: the recipe's); CPU ranks without CUDA");
    run->add_option("--device", flags.device, "auto, cpu or cuda")->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    run->add_option("--threads", flags.threads, "CPU threads per rank (default 0: the cores shared among ranks)");
    run->add_option("--output", flags.output, "whose output to show: all ranks or rank0")
        ->check(CLI::IsMember({"all", "rank0"}));
    run->add_option("--timeout", flags.timeout_s, "seconds a rank may wait in a collective (default 120)");
    run->footer("\nExample:\n  recipe run pretrain --set steps=300 --set batch_size=8");

    // CLI11 reports an unknown command only as "a subcommand is required".
    const auto commands = app.get_subcommands([](CLI::App*) { return true; });
    auto is_command = [&](const char* word) {
        return std::any_of(commands.begin(), commands.end(), [&](CLI::App* c) { return c->get_name() == word; });
    };
    if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
        fmt::print(stderr, "error: unknown command '{}'; valid commands: list, show, run (see recipe --help)\n", argv[1]);
        return 2;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    try {
        if (list->parsed()) return list_recipes();
        if (show->parsed()) return show_recipe(show_name);
        if (run->parsed()) return run_recipe(flags, argc, argv);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 2;
    }
    return 2;
}

}  // namespace levers
