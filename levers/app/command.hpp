// A subcommand of the command line (`recipe run`, `recipe plan`, ...): it
// adds itself to the application with its own options, beside its code, and
// runs once it is the one parsed. cli.cpp lists them and dispatches.
#pragma once

#include "levers/app/cli_parts.hpp"

#include <CLI/CLI.hpp>

#include <memory>

namespace levers {

class Command {
public:
    virtual ~Command() = default;
    // Adds the subcommand and its options to `app`; `ex` fills its help's examples.
    virtual void add_to(CLI::App& app, const Examples& ex) = 0;
    // Runs it once parsed: the exit code. Throws levers::Error for bad input (exit 2).
    virtual int run(int argc, char** argv) = 0;
    bool parsed() const { return command_ != nullptr && command_->parsed(); }

protected:
    CLI::App* command_ = nullptr;  // set by add_to
};

// The commands, each made where its code is.
std::unique_ptr<Command> list_command();      // recipe_info.cpp: list
std::unique_ptr<Command> show_command();      // recipe_info.cpp: show
std::unique_ptr<Command> run_command();       // run_command.cpp
std::unique_ptr<Command> plan_command();      // plan_command.cpp
std::unique_ptr<Command> submit_command();    // submit.cpp
std::unique_ptr<Command> sweep_command();     // sweep_command.cpp
std::unique_ptr<Command> plot_command();      // plot.cpp
std::unique_ptr<Command> bench_command();     // bench/bench_cli.cpp
std::unique_ptr<Command> status_command();    // status_command.cpp: status
std::unique_ptr<Command> workspace_command();  // status_command.cpp: workspace
std::unique_ptr<Command> tokenize_command();  // tokenize_command.cpp
std::unique_ptr<Command> gguf_info_command();  // gguf_info_command.cpp

}  // namespace levers
