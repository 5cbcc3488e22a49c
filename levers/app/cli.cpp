#include "levers/app/cli.hpp"

#include "levers/app/command.hpp"
#include "levers/app/sweep.hpp"
#include "levers/core/environment.hpp"
#include "levers/core/error.hpp"
#include "levers/recipe/recipe.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

namespace levers {

namespace {

constexpr const char* kVersion = "levers 0.1.0";

constexpr const char* kExamples = R"(
Examples:
  {recipe} list                                  every recipe and what it does
  {recipe} show {pretrain}                         its parameters, defaults and help
  {recipe} run {pretrain}                          GPT on the book corpus (CPU)
  {recipe} run {pretrain} --set steps=2000 --set lr=1e-3
  {recipe} run {pretrain} --gpus 4                 4 ranks, gradients averaged
  {recipe} plan {pretrain} --gpus 8 --device cuda --memory 80GB   memory per rank, largest micro-batch
  {recipe} sweep {classify} --grid lr=1e-3,3e-3 --grid seed=1,2
  {recipe} plot runs/{pretrain}/latest             loss and evaluation curves to a PNG
  {recipe} bench scaling {pretrain} --gpus 1,2     throughput and speedup at each GPU count
  {recipe} submit {pretrain} --nodes 2 --gpus 8     hand the job to Slurm
  {recipe} status                                GPUs, who holds them, who waits
  {recipe} tokenize --tokenizer DIR notes.txt    text to token ids with a model's tokenizer
  {recipe} gguf-info model.gguf                  a GGUF file's metadata and tensors
  {recipe} workspace multi-gpu off               refuse jobs of more than one GPU
  {recipe} help env                              every environment variable levers reads)";

// A user's binary: its own recipes, and examples with the first of them.
std::string user_binary_footer(const std::string& program, const std::vector<std::string>& names) {
    return fmt::format("\nIts recipes: {1}\n\nExamples:\n  {0} list\n  {0} show {2}\n  {0} run {2}\n"
                       "  {0} run {2} --gpus 2\n  {0} sweep {2} --grid seed=1,2\n  {0} status\n  {0} help env",
                       program, fmt::join(names, ", "), names.front());
}

// `recipe help [env]`: the top help (made before parsing, after which CLI11's is the parsed command's), or a topic's.
class HelpCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        command_ = app.add_subcommand("help", "Show this help, or a topic's: env (every environment variable levers "
                                              "reads)");
        command_->add_option("topic", topic_, "env")->check(CLI::IsMember({"env"}));
        command_->footer(ex("\nExample:\n  {recipe} help env"));
    }
    void keep_top_help(std::string text) { top_help_ = std::move(text); }
    int run(int, char**) override {
        fmt::print("{}", topic_ == "env" ? env::manual() : top_help_);
        return 0;
    }

private:
    std::string topic_, top_help_;
};

// CLI11 reports an unknown command only as "a subcommand is required": named here, with the valid ones.
bool unknown_command(CLI::App& app, int argc, char** argv, const std::string& program) {
    std::vector<std::string> names;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(c->get_name());
    if (argc < 2 || argv[1][0] == '-' || std::find(names.begin(), names.end(), argv[1]) != names.end()) return false;
    fmt::print(stderr, "error: unknown command '{}'; valid commands: {} (see {} --help)\n", argv[1],
               fmt::join(names, ", "), program);
    return true;
}

}  // namespace

int main(int argc, char** argv) {
    // The slot ledger counts GPUs in PCI order (nvidia-smi's); CUDA numbers
    // them fastest first unless told otherwise, so on a node of mixed GPUs
    // CUDA_VISIBLE_DEVICES would name other GPUs than the ledger handed out.
    // Set before any CUDA call, inherited by ranks and sweep cells; a value
    // the user set wins.
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
    set_map_runner(&run_map_cells);  // Recipe::map's cells run as this command's sweeps
    const std::string program = std::filesystem::path(argv[0]).filename().string();
    CLI::App app("levers: train neural networks on 1 to 8 GPUs from C++, with recipes written in C++.", program);
    app.set_version_flag("--version", kVersion);
    app.require_subcommand(1);
    const auto names = recipe_names();
    const Examples ex(program, names);
    const bool users_binary = !is_registered("pretrain") && !names.empty();
    app.footer(users_binary ? user_binary_footer(program, names) : ex(kExamples));

    auto help = std::make_unique<HelpCommand>();
    HelpCommand& help_command = *help;
    std::vector<std::unique_ptr<Command>> commands;
    for (auto make : {list_command, show_command, run_command, plan_command, submit_command, sweep_command,
                      plot_command, bench_command, status_command, workspace_command, tokenize_command,
                      gguf_info_command})
        commands.push_back(make());
    commands.push_back(std::move(help));
    for (auto& c : commands) c->add_to(app, ex);
    if (unknown_command(app, argc, argv, program)) return 2;
    help_command.keep_top_help(app.help());
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }
    try {
        for (auto& c : commands)
            if (c->parsed()) return c->run(argc, argv);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 2;
    }
    return 2;
}

}  // namespace levers
