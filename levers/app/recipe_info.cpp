// `recipe list` and `recipe show NAME`: the registered recipes, their
// parameters and the model their defaults build.
#include "levers/app/command.hpp"
#include "levers/core/error.hpp"
#include "levers/recipe/recipe.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace levers {

namespace {

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
    fmt::print("{}: {}\ndefault GPUs: {}\nparameters (set with --set name=value):\n", r.name(), r.description(),
               r.default_gpus());
    std::size_t width = 16;  // the names' column, as wide as the longest name
    for (const auto& p : r.params()) width = std::max(width, p.name.size());
    for (const auto& p : r.params())
        fmt::print("  {:<{}} {:<10} {:<14} {}{}\n", p.name, width, type_name(p.default_value),
                   to_text(p.default_value), p.help, p.bounds.empty() ? "" : " [" + p.bounds.str() + "]");
    if (!r.framework_loop()) return 0;
    // The model the defaults build, by the names its checkpoints use.
    try {
        const auto params = r.model_parameters(r.defaults());
        std::int64_t total = 0, trained = 0;
        for (const auto& p : params) (p.trainable ? trained : total) += p.shape.numel();
        total += trained;
        fmt::print("model parameters ({} tensors, {} values, {} of them trained):\n", params.size(), total, trained);
        for (const auto& p : params)
            fmt::print("  {:<40} {:<16} {}{}\n", p.name, p.shape.str(), p.trainable ? "trained" : "frozen",
                       p.trainable && p.decay ? ", weight decay" : "");
    } catch (const Error& e) {
        fmt::print("model parameters: not built with the defaults ({})\n", e.message());
    }
    return 0;
}

class ListCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        command_ = app.add_subcommand("list", "Show every registered recipe with its description and parameters");
        command_->footer(ex("\nExample:\n  {recipe} list"));
    }
    int run(int, char**) override { return list_recipes(); }
};

class ShowCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        command_ = app.add_subcommand("show", "Show one recipe's parameters, types, defaults and help");
        command_->add_option("name", name_, "recipe name")->required();
        command_->footer(ex("\nExample:\n  {recipe} show {pretrain}"));
    }
    int run(int, char**) override { return show_recipe(name_); }

private:
    std::string name_;
};

}  // namespace

std::unique_ptr<Command> list_command() { return std::make_unique<ListCommand>(); }
std::unique_ptr<Command> show_command() { return std::make_unique<ShowCommand>(); }

}  // namespace levers
