#include "levers/app/cli.hpp"

#include "levers/app/bench/bench_cli.hpp"
#include "levers/app/cli_parts.hpp"
#include "levers/app/plan_command.hpp"
#include "levers/app/plot.hpp"
#include "levers/app/run_command.hpp"
#include "levers/app/status_command.hpp"
#include "levers/app/tokenize_command.hpp"
#include "levers/app/submit.hpp"
#include "levers/app/sweep.hpp"
#include "levers/app/sweep_command.hpp"
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
  {recipe} workspace multi-gpu off               refuse jobs of more than one GPU
  {recipe} help env                              every environment variable levers reads)";

// A user's binary: its own recipes, and examples with the first of them.
std::string user_binary_footer(const std::string& program, const std::vector<std::string>& names) {
    return fmt::format("\nIts recipes: {1}\n\nExamples:\n  {0} list\n  {0} show {2}\n  {0} run {2}\n"
                       "  {0} run {2} --gpus 2\n  {0} sweep {2} --grid seed=1,2\n  {0} status\n  {0} help env",
                       program, fmt::join(names, ", "), names.front());
}

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
    for (const auto& p : r.params())
        fmt::print("  {:<16} {:<10} {:<14} {}{}\n", p.name, type_name(p.default_value), to_text(p.default_value), p.help,
                   p.bounds.empty() ? "" : " [" + p.bounds.str() + "]");
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

    auto* list = app.add_subcommand("list", "Show every registered recipe with its description and parameters");
    list->footer(ex("\nExample:\n  {recipe} list"));
    std::string show_name;
    auto* show = app.add_subcommand("show", "Show one recipe's parameters, types, defaults and help");
    show->add_option("name", show_name, "recipe name")->required();
    show->footer(ex("\nExample:\n  {recipe} show {pretrain}"));

    RunFlags flags;
    auto* run = app.add_subcommand("run", "Run a recipe and print its result as JSON on the last line");
    run->add_option("name", flags.name, "recipe name")->required();
    run->add_option("--set", flags.sets, "set a parameter: --set name=value (repeatable)");
    run->add_option("--gpus", flags.gpus, "GPUs, one rank each (default: the recipe's); CPU ranks without CUDA");
    add_device_option(*run, flags.device, "where the ranks compute");
    add_precision_option(*run, flags.precision, "what they compute in");
    run->add_option("--out", flags.out, "run directory (default: runs/NAME/<date-time>)");
    run->add_option("--threads", flags.threads, "CPU threads per rank (default 0: the job's core slots shared)");
    run->add_option("--output", flags.output, "whose output to show: all ranks or rank0")
        ->check(CLI::IsMember({"all", "rank0"}));
    run->add_option("--timeout", flags.timeout_s, "seconds a rank may wait in a collective (default 120)");
    std::string resume_what;
    run->add_option("--resume", resume_what,
                    "continue from a checkpoint: a file, a run directory, or latest (the newest run's)")
        ->expected(0, 1);
    run->add_option("--restarts", flags.restarts,
                    "when a rank fails, start the job again from its latest checkpoint, this many times at most "
                    "(default 0)");
    run->add_option("--memory", flags.memory, "each rank's memory for --set micro_batch=auto, e.g. 80GB (default: "
                                              "the GPU's, or the CPU's available memory shared by the ranks)");
    bool run_no_wait = false;
    run->add_flag("--no-wait", run_no_wait, "fail at once if the GPUs are busy instead of queueing");
    run->footer(ex("\nExamples:\n  {recipe} run {pretrain} --set steps=300 --set batch_size=8\n"
                   "  {recipe} run {fine_tune} --gpus 8 --out runs/ft8\n"
                   "  {recipe} run {pretrain} --resume latest --set steps=8000\n"
                   "  {recipe} run {pretrain} --gpus 2 --restarts 3 --set checkpoint_every=100"));

    PlanFlags plan_flags;
    auto* plan = app.add_subcommand("plan", "A run's memory per rank before it starts: weights, gradients, optimizer "
                                            "state, activations, and the largest micro-batch that fits");
    plan->add_option("name", plan_flags.name, "recipe name")->required();
    plan->add_option("--set", plan_flags.sets, "set a parameter: --set name=value (repeatable)");
    plan->add_option("--gpus", plan_flags.gpus, "ranks, one per GPU (default: the recipe's)");
    plan->add_option("--device", plan_flags.device, "where the ranks would compute: auto, cpu or cuda (cuda needs "
                                                    "no GPU here, only its memory: from a GPU, or --memory)")
        ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
    add_precision_option(*plan, plan_flags.precision, "what they would compute in");
    plan->add_option("--memory", plan_flags.memory, "each rank's memory, e.g. 80GB (default: the GPU's, or the "
                                                    "CPU's available memory shared by the ranks)");
    plan->footer(ex("\nExamples:\n  {recipe} plan {pretrain} --gpus 4\n"
                    "  {recipe} plan {pretrain} --gpus 8 --device cuda --memory 80GB --precision bf16 --set zero=2\n"
                    "  {recipe} run {pretrain} --gpus 4 --set micro_batch=auto"));

    SubmitFlags submit_flags;
    auto* submit = app.add_subcommand("submit", "Hand a job to Slurm: an sbatch script in a new run directory");
    submit->add_option("name", submit_flags.name, "recipe name")->required();
    submit->add_option("--nodes", submit_flags.nodes, "nodes (default 1)");
    submit->add_option("--gpus", submit_flags.gpus, "GPUs per node, one rank each (default: the recipe's); CPU "
                                                    "ranks per node without GPUs");
    submit->add_option("--time", submit_flags.time, "the job's time limit, as sbatch reads it (e.g. 2:00:00)");
    submit->add_option("--partition", submit_flags.partition, "the Slurm partition (default: the default one)");
    submit->add_option("--set", submit_flags.sets, "set a parameter: --set name=value (repeatable)");
    add_device_option(*submit, submit_flags.device, "where the ranks compute");
    submit->add_option("--threads", submit_flags.threads, "CPU threads per rank (default 0: the cores shared)");
    submit->add_option("--out", submit_flags.out, "run directory (default: runs/NAME/<date-time>)");
    submit->add_option("--restarts", submit_flags.restarts,
                       "when a rank fails, start again from the run's newest checkpoint, this many times at most");
    submit->footer(ex("\nExamples:\n  {recipe} submit {pretrain} --nodes 2 --gpus 8 --time 4:00:00\n"
                      "  {recipe} submit {classify} --gpus 2 --partition cpu --restarts 2"));

    SweepFlags sweep_flags;
    auto* sweep = app.add_subcommand("sweep", "Run many one-GPU trainings of a recipe side by side");
    sweep->add_option("name", sweep_flags.name, "recipe name")->required();
    sweep->add_option("--grid", sweep_flags.grids, "name=v1,v2,...: one cell per value (grids are crossed)");
    sweep->add_option("--cells", sweep_flags.cells_file, "JSON file: an array of objects, one per cell");
    sweep->add_option("--set", sweep_flags.sets, "set a parameter of every cell: --set name=value");
    sweep->add_option("--gpus-per-cell", sweep_flags.gpus_per_cell, "GPUs per cell (default 1)");
    sweep->add_option("--max-parallel", sweep_flags.max_parallel, "cells at once at most (default 0: as GPUs allow)");
    sweep->add_option("--out", sweep_flags.out, "sweep directory (default: runs/NAME/sweep-<date-time>)");
    sweep->add_option("--timeout", sweep_flags.timeout_s, "each cell's collective timeout in seconds");
    add_device_option(*sweep, sweep_flags.device, "where every cell computes");
    add_precision_option(*sweep, sweep_flags.precision, "what every cell computes in");
    sweep->add_flag("--no-wait", sweep_flags.no_wait, "fail if no GPU is free instead of queueing");
    sweep->footer(ex("\nExamples:\n  {recipe} sweep {classify} --grid lr=1e-3,3e-3 --grid seed=1,2,3\n"
                     "  {recipe} sweep {fine_tune} --cells cells.json --max-parallel 2"));

    std::vector<std::string> plot_dirs;
    std::string plot_out;
    auto* plot = app.add_subcommand("plot", "Draw loss and evaluation curves of runs (or a sweep's cells) to a PNG");
    plot->add_option("runs", plot_dirs, "run directories, or a sweep's directory")->required();
    plot->add_option("--out", plot_out, "the PNG (default: plot.png in the first directory)");
    plot->footer(ex("\nExamples:\n  {recipe} plot runs/{pretrain}/latest\n"
                    "  {recipe} plot runs/{classify}/sweep-latest --out sweep.png"));

    bench::BenchCli bench_cli(app, ex);

    auto* status = app.add_subcommand("status", "Show the node's GPUs (CPU slots), their holders and waiting jobs");
    status->footer(ex("\nExamples:\n  {recipe} status\n  LEVERS_LEDGER_DIR=/run/lock/levers-gpus {recipe} status"));
    std::vector<std::string> ws_words;
    auto* workspace = app.add_subcommand("workspace", "Show or change what jobs may ask for");
    workspace->add_option("setting", ws_words, "multi-gpu on|off, or max-gpus N");
    workspace->footer(ex("\nExamples:\n  {recipe} workspace multi-gpu off\n  {recipe} workspace max-gpus 4"));

    TokenizeFlags tokenize_flags;
    auto* tokenize = app.add_subcommand("tokenize", "Text to token ids with a model's tokenizer, ids to text, or a "
                                                    "conversation through its chat template");
    tokenize->add_option("--tokenizer", tokenize_flags.tokenizer,
                         "a model's directory (tokenizer.json, or GPT-2's vocab.json and merges.txt) or a tokenizer.json")
        ->required();
    tokenize->add_option("input", tokenize_flags.input, "a file (default: stdin)");
    tokenize->add_flag("--decode", tokenize_flags.decode, "the input is a JSON array of ids: print their text");
    tokenize->add_flag("--chat", tokenize_flags.chat,
                       "the input is a conversation (a JSON list of {role, content}, or {\"messages\": [...]}): "
                       "render it through the directory's chat template, then tokenize");
    tokenize->add_flag("--generation-prompt", tokenize_flags.generation_prompt,
                       "with --chat: end with the assistant's turn opened");
    tokenize->add_flag("--render", tokenize_flags.render_only, "with --chat: print the rendered text, not its ids");
    tokenize->add_flag("--add-special", tokenize_flags.add_special,
                       "add the tokenizer's own tokens around plain text (its BOS)");
    tokenize->add_flag("--skip-special", tokenize_flags.skip_special, "with --decode: leave special tokens out");
    tokenize->footer(ex("\nExamples:\n  {recipe} tokenize --tokenizer ~/models/Llama-3.2-1B-Instruct notes.txt\n"
                        "  echo '[9906, 1917]' | {recipe} tokenize --tokenizer ~/models/Llama-3.2-1B-Instruct "
                        "--decode\n"
                        "  {recipe} tokenize --tokenizer ~/models/Qwen3-0.6B --chat --render conversation.json"));

    std::string help_topic;
    auto* help = app.add_subcommand("help", "Show this help, or a topic's: env (every environment variable levers reads)");
    help->add_option("topic", help_topic, "env")->check(CLI::IsMember({"env"}));
    help->footer(ex("\nExample:\n  {recipe} help env"));

    // CLI11 reports an unknown command only as "a subcommand is required".
    std::vector<std::string> commands;
    for (const CLI::App* c : app.get_subcommands([](CLI::App*) { return true; })) commands.push_back(c->get_name());
    if (argc > 1 && argv[1][0] != '-' && std::find(commands.begin(), commands.end(), argv[1]) == commands.end()) {
        fmt::print(stderr, "error: unknown command '{}'; valid commands: {} (see {} --help)\n", argv[1],
                   fmt::join(commands, ", "), program);
        return 2;
    }
    const std::string top_help = app.help();  // after parsing, help() is the parsed subcommand's
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    try {
        if (help->parsed()) {
            fmt::print("{}", help_topic == "env" ? env::manual() : top_help);
            return 0;
        }
        if (list->parsed()) return list_recipes();
        if (show->parsed()) return show_recipe(show_name);
        if (run->parsed()) {
            flags.wait = !run_no_wait;
            if (run->count("--resume") > 0) flags.resume = resume_what;
            return run_recipe(flags, argc, argv);
        }
        if (plan->parsed()) return plan_command(plan_flags);
        if (sweep->parsed()) return sweep_recipe(sweep_flags);
        if (submit->parsed()) return submit_recipe(submit_flags);
        if (status->parsed()) return show_status();
        if (bench_cli.parsed()) return bench_cli.run();
        if (plot->parsed()) {
            std::vector<std::filesystem::path> dirs(plot_dirs.begin(), plot_dirs.end());
            const std::filesystem::path out = plot_out.empty() ? dirs.front() / "plot.png" : std::filesystem::path(plot_out);
            plot_runs(dirs, out);
            fmt::print("wrote {}\n", out.string());
            return 0;
        }
        if (workspace->parsed()) return workspace_command(ws_words);
        if (tokenize->parsed()) return tokenize_command(tokenize_flags);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 2;
    }
    return 2;
}

}  // namespace levers
