#include "levers/app/submit.hpp"

#include "levers/app/command.hpp"
#include "levers/app/run_config.hpp"
#include "levers/core/error.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/recipe/run_dir.hpp"

#include <boost/process.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/stat.h>

namespace levers {

namespace fs = std::filesystem;
namespace bp = boost::process;

namespace {

// Where `program` is on PATH ("" if it is not), as the shell would find it.
std::string on_path(const std::string& program) { return bp::search_path(program).string(); }

// Runs `program args...` to its end: its output (stdout and stderr together) and exit code.
std::pair<std::string, int> output_of(const std::string& program, const std::vector<std::string>& args) {
    bp::ipstream out;
    bp::child child(bp::exe = program, bp::args = args, bp::std_in < bp::null, (bp::std_out & bp::std_err) > out);
    std::string text, line;
    while (std::getline(out, line)) text += line + '\n';
    child.wait();
    return {text, child.exit_code()};
}

// A word as the shell reads it: single-quoted.
std::string quoted(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

std::string token() {
    std::random_device rd;
    return fmt::format("{:08x}{:08x}", rd(), rd());
}

std::string sbatch_script(const SubmitFlags& f, const Recipe& r, int ranks_per_node, const fs::path& dir) {
    const std::string program = fs::read_symlink("/proc/self/exe").string();
    std::string run = fmt::format("{} run {} --device {}", quoted(program), r.name(), f.device);
    for (const auto& s : f.sets) run += " --set " + quoted(s);
    if (f.threads > 0) run += fmt::format(" --threads {}", f.threads);
    std::string s = "#!/bin/bash\n";
    s += fmt::format("# Written by `recipe submit {}`: the recipe on the allocation, one task per rank.\n", r.name());
    s += fmt::format("#SBATCH --job-name=levers-{}\n", r.name());
    s += fmt::format("#SBATCH --nodes={}\n#SBATCH --ntasks-per-node={}\n", f.nodes, ranks_per_node);
    if (f.device == "cuda") s += fmt::format("#SBATCH --gpus-per-node={}\n", ranks_per_node);
    if (!f.time.empty()) s += fmt::format("#SBATCH --time={}\n", f.time);
    if (!f.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", f.partition);
    s += fmt::format("#SBATCH --output={}\n", (dir / "slurm-%j.out").string());
    s += fmt::format("#SBATCH --chdir={}\n", fs::current_path().string());
    s += "set -uo pipefail\n";
    s += "# The rendezvous store at the allocation's first node; a token keeps other jobs' ranks out.\n";
    s += "first=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n";
    s += "# The address Slurm reaches it at (NodeAddr), which need not be a name the nodes resolve.\n";
    s += "export MASTER_ADDR=$(scontrol show node \"$first\" -o | sed -n 's/.* NodeAddr=\\([^ ]*\\).*/\\1/p')\n";
    s += "export MASTER_ADDR=${MASTER_ADDR:-$first}\n";
    s += "export MASTER_PORT=$((29500 + SLURM_JOB_ID % 10000))\n";  // torchrun's port and above
    s += fmt::format("export LEVERS_JOB_TOKEN={}\n", token());
    s += fmt::format("export LEVERS_RUN_DIR={}\n", quoted(dir.string()));
    s += fmt::format("restarts={}\n", f.restarts);
    s += "resume=()\n";
    s += "for attempt in $(seq 0 \"$restarts\"); do\n";
    s += fmt::format("    srun --kill-on-bad-exit=1 {} \"${{resume[@]}}\" && exit 0\n", run);
    s += "    status=$?\n";
    s += "    [ \"$attempt\" -lt \"$restarts\" ] || exit $status\n";
    s += "    # As recipe run --restarts: again from the run's newest checkpoint, if it has one yet.\n";
    s += "    newest=$(ls \"$LEVERS_RUN_DIR\"/checkpoints/step-*.ckpt 2>/dev/null | tail -n 1)\n";
    s += "    echo \"recipe: the job failed (exit $status); restart $((attempt + 1)) of $restarts, from "
         "${newest:-the beginning}\" >&2\n";
    s += "    [ -z \"$newest\" ] || resume=(--resume \"$newest\")\n";
    s += "done\n";
    return s;
}

}  // namespace

int submit_recipe(const SubmitFlags& f) {
    Recipe r = find_recipe(f.name);
    Config cfg = resolve_config(r, f.sets);
    r.check(cfg);
    LEVERS_CHECK(f.nodes >= 1, "--nodes must be >= 1, got {}", f.nodes);
    LEVERS_CHECK(f.gpus >= 0, "--gpus must be >= 1 (per node), got {}", f.gpus);
    LEVERS_CHECK(f.restarts >= 0, "--restarts must be >= 0 (0: a failed job stays failed), got {}", f.restarts);
    LEVERS_CHECK(f.threads >= 0, "--threads must be >= 0 (0: the cores shared among ranks), got {}", f.threads);
    const std::string sbatch = on_path("sbatch");
    LEVERS_CHECK(!sbatch.empty(), "recipe submit hands the job to Slurm, and sbatch is not on this machine's PATH "
                 "(install Slurm's client, e.g. Debian's slurm-client; or run it here: recipe run {})", r.name());
    const int per_node = f.gpus > 0 ? f.gpus : r.default_gpus();
    const fs::path dir = make_run_dir(r.name(), f.out);
    const fs::path script = dir / "job.sbatch";
    std::ofstream(script) << sbatch_script(f, r, per_node, dir);
    ::chmod(script.c_str(), 0755);
    auto [out, status] = output_of(sbatch, {"--parsable", script.string()});
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
    if (status != 0) {
        fmt::print(stderr, "error: sbatch refused the job ({}): {}\n", script.string(), out);
        return 1;
    }
    const std::string job = out.substr(0, out.find(';'));  // "id;cluster" on federated clusters
    std::ofstream(dir / "slurm_job_id") << job << '\n';
    fmt::print("recipe {}: submitted to Slurm as job {} ({} node{} x {} rank{}); run directory {}\n", r.name(), job,
               f.nodes, f.nodes == 1 ? "" : "s", per_node, per_node == 1 ? "" : "s", dir.string());
    return 0;
}

std::string slurm_jobs() {
    const std::string squeue = on_path("squeue");
    if (squeue.empty()) return "";
    const auto [out, status] = output_of(squeue, {"--noheader", "--format=%i %j %T %M %D"});
    if (status != 0) return "";
    std::string mine, line;
    for (std::istringstream lines(out); std::getline(lines, line);)
        if (line.find(" levers-") != std::string::npos) mine += "  " + line + "\n";
    return mine.empty() ? "  none\n" : mine;
}

namespace {

class SubmitCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* submit = command_ = app.add_subcommand("submit", "Hand a job to Slurm: an sbatch script in a new run "
                                                               "directory");
        submit->add_option("name", flags_.name, "recipe name")->required();
        submit->add_option("--nodes", flags_.nodes, "nodes (default 1)");
        submit->add_option("--gpus", flags_.gpus, "ranks per node, one GPU each (default: the recipe's); CPU ranks "
                                                  "per node without GPUs");
        submit->add_option("--time", flags_.time, "the job's time limit, as sbatch reads it (e.g. 2:00:00)");
        submit->add_option("--partition", flags_.partition, "the Slurm partition (default: the default one)");
        submit->add_option("--set", flags_.sets, "set a parameter: --set name=value (repeatable)");
        add_device_option(*submit, flags_.device, "where the ranks compute");
        submit->add_option("--threads", flags_.threads, "CPU threads per rank (default 0: the cores shared)");
        submit->add_option("--out", flags_.out, "run directory (default: runs/NAME/<date-time>)");
        submit->add_option("--restarts", flags_.restarts,
                           "when a rank fails, start again from the run's newest checkpoint, this many times at most");
        submit->footer(ex("\nExamples:\n  {recipe} submit {pretrain} --nodes 2 --gpus 8 --time 4:00:00\n"
                          "  {recipe} submit {classify} --gpus 2 --partition cpu --restarts 2"));
    }
    int run(int, char**) override { return submit_recipe(flags_); }

private:
    SubmitFlags flags_;
};

}  // namespace

std::unique_ptr<Command> submit_command() { return std::make_unique<SubmitCommand>(); }

}  // namespace levers
