#include "framework/recipe/cli.hpp"

#include "framework/core/error.hpp"
#include "framework/core/threads.hpp"
#include "framework/recipe/recipe.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

namespace levers {

namespace {

constexpr const char* kVersion = "levers 0.1.0";

constexpr const char* kExamples = R"(
Examples:
  recipe list                                  every recipe and what it does
  recipe show pretrain                         its parameters, defaults and help
  recipe run pretrain                          GPT on the book corpus (CPU)
  recipe run pretrain --set steps=2000 --set lr=1e-3
  recipe run classify --threads 1              MLP on Fashion-MNIST, one thread)";

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

int run_recipe(const std::string& name, const std::vector<std::string>& sets, int threads) {
    Recipe r = find_recipe(name);
    Config cfg = resolve_config(r, sets);
    LEVERS_CHECK(threads >= 0, "--threads must be >= 0 (0: every available core), got {}", threads);
    set_threads(threads == 0 ? available_cores() : threads);
    fmt::print("recipe {}: 1 CPU process, {} thread{}\n", r.name(), levers::threads(), levers::threads() == 1 ? "" : "s");
    std::fflush(stdout);
    Result result;
    try {
        result = r.body()(cfg);
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: recipe {} failed: {}\n", r.name(), e.what());
        return 1;
    }
    // Generated text can hold any bytes: replace invalid UTF-8 rather than fail.
    fmt::print("{}\n", result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return 0;
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

    std::string run_name;
    std::vector<std::string> sets;
    int threads = 0;
    auto* run = app.add_subcommand("run", "Run a recipe and print its result as JSON on the last line");
    run->add_option("name", run_name, "recipe name")->required();
    run->add_option("--set", sets, "set a parameter: --set name=value (repeatable)");
    run->add_option("--threads", threads, "CPU threads (default 0: every available core)");
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
        if (run->parsed()) return run_recipe(run_name, sets, threads);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 2;
    }
    return 2;
}

}  // namespace levers
