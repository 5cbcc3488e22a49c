#include "levers/app/status_command.hpp"

#include "levers/app/command.hpp"
#include "levers/app/submit.hpp"
#include "levers/app/workspace.hpp"
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/launch/slot_ledger.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace levers {

namespace {

// One ledger's slots, who holds each, and the jobs queued for them.
void print_ledger(const launch::SlotLedger& ledger) {
    const bool cpu = ledger.kind() == Device::Kind::cpu;
    const char* unit = cpu ? "slot" : "GPU";
    const auto holders = ledger.holders();
    fmt::print("{} {}s (ledger {}):\n", ledger.slots().size(), cpu ? "CPU slot" : "CUDA GPU", ledger.dir().string());
    for (int slot : ledger.slots()) {
        auto h = std::find_if(holders.begin(), holders.end(), [&](const launch::SlotHolder& x) { return x.slot == slot; });
        if (h == holders.end())
            fmt::print("  {} {}: free\n", unit, slot);
        else
            fmt::print("  {} {}: job '{}' (pid {})\n", unit, slot, h->job, h->pid);
    }
    const auto waiting = ledger.waiters();
    fmt::print("waiting jobs: {}\n", waiting.empty() ? "none" : "");
    for (const auto& w : waiting) fmt::print("  job '{}' (pid {}) needs {} {}s\n", w.job, w.pid, w.slots, unit);
}

}  // namespace

int show_status() {
    // A node with GPUs has two ledgers: its GPUs, for GPU jobs, and its CPU slots, for CPU jobs.
    if (const int gpus = node_gpu_count(); gpus > 0) print_ledger(launch::SlotLedger::for_node(gpus));
    print_ledger(launch::SlotLedger::for_node(0));
    const Workspace ws = load_workspace();
    fmt::print("workspace: multi-gpu {} ({}), max-gpus {} ({})\n", ws.multi_gpu ? "on" : "off", ws.multi_gpu_from,
               ws.max_gpus, ws.max_gpus_from);
    if (const std::string queued = slurm_jobs(); !queued.empty())
        fmt::print("levers jobs in Slurm's queue (id, name, state, time, nodes):\n{}", queued);
    return 0;
}

int change_workspace(const std::vector<std::string>& words) {
    if (words.size() == 2) {
        set_workspace(words[0], words[1]);
        fmt::print("workspace: {} set to {} in {}\n", words[0], words[1], workspace_file().string());
    } else {
        LEVERS_CHECK(words.empty(), "recipe workspace takes a setting and a value: multi-gpu on|off, or max-gpus N");
    }
    const Workspace ws = load_workspace();
    fmt::print("multi-gpu {} ({})\nmax-gpus {} ({})\n", ws.multi_gpu ? "on" : "off", ws.multi_gpu_from, ws.max_gpus,
               ws.max_gpus_from);
    return 0;
}

namespace {

class StatusCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        command_ = app.add_subcommand("status", "Show the node's GPUs (CPU slots), their holders and waiting jobs");
        command_->footer(ex("\nExamples:\n  {recipe} status\n  LEVERS_LEDGER_DIR=/run/lock/levers-gpus {recipe} "
                            "status"));
    }
    int run(int, char**) override { return show_status(); }
};

class WorkspaceCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        command_ = app.add_subcommand("workspace", "Show or change what jobs may ask for");
        command_->add_option("setting", words_, "multi-gpu on|off, or max-gpus N");
        command_->footer(ex("\nExamples:\n  {recipe} workspace multi-gpu off\n  {recipe} workspace max-gpus 4"));
    }
    int run(int, char**) override { return change_workspace(words_); }

private:
    std::vector<std::string> words_;
};

}  // namespace

std::unique_ptr<Command> status_command() { return std::make_unique<StatusCommand>(); }
std::unique_ptr<Command> workspace_command() { return std::make_unique<WorkspaceCommand>(); }

}  // namespace levers
