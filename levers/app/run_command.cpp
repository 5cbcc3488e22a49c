#include "levers/app/run_command.hpp"

#include "levers/app/command.hpp"
#include "levers/app/job_slots.hpp"
#include "levers/app/plan_command.hpp"
#include "levers/app/rank_join.hpp"
#include "levers/app/restarts.hpp"
#include "levers/app/run_config.hpp"
#include "levers/core/error.hpp"
#include "levers/core/output_tee.hpp"
#include "levers/core/threads.hpp"
#include "levers/launch/env_contract.hpp"
#include "levers/launch/launcher.hpp"
#include "levers/recipe/checkpoints.hpp"
#include "levers/recipe/device_choice.hpp"
#include "levers/recipe/run_dir.hpp"
#include "levers/train/train_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

namespace levers {

namespace fs = std::filesystem;

namespace {

void publish_to(const fs::path& dir, const Result& result) {
    write_json_file(dir / "result.json", result);
    fmt::print("{}\n", result_text(result));
}

// Starts one process per rank on `GPUs` and supervises them to the end;
// after a failing rank, again from the latest checkpoint, --restarts times.
int launch_ranks(const Recipe& r, const RunFlags& flags, int ranks, int threads, Device::Kind device,
                 const std::vector<int>& slots, RunContext run, int argc, char** argv) {
    const fs::path dir = run.dir;
    launch::LaunchOptions options;
    options.program = fs::read_symlink("/proc/self/exe").string();
    options.args.assign(argv + 1, argv + argc);
    options.ranks = ranks;
    options.threads_per_rank = threads;
    options.device = device;
    if (device == Device::Kind::cuda) options.cuda_gpus = slots;
    options.timeout = std::chrono::milliseconds(static_cast<long>(flags.timeout_s * 1000));
    options.all_output = flags.output == "all";
    options.log_dir = dir;
    options.live_progress = console_is_terminal();
    for (int restart = 1;; ++restart) {
        options.env = run_exports(run);
        auto outcome = launch::launch(options);
        if (outcome.exit_code == 0 && outcome.result) publish_to(dir, Result::parse(*outcome.result));
        if (outcome.exit_code == 0 || outcome.interrupted || restart > flags.restarts) return outcome.exit_code;
        prepare_restart(r, run, restart, flags.restarts, outcome.failure);
    }
}

}  // namespace

int run_recipe(const RunFlags& flags, int argc, char** argv) {
    Recipe r = find_recipe(flags.name);
    const auto env = launch::read_rank_env();
    // This run's context: a launched rank's directory and checkpoint are its launcher's (exported);
    // the checkpoint to resume from is found once, by whoever starts the job.
    RunContext run = exported_run();
    run.device_auto = flags.device == "auto";
    if (env.source != "levers" && flags.resume) {
        LEVERS_CHECK(r.framework_loop(), "--resume: recipe '{}' owns its loop (.run), so levers cannot resume it",
                     r.name());
        run.resume = fs::absolute(find_checkpoint(flags.resume->empty() ? "latest" : *flags.resume, r.name()));
    }
    std::vector<std::string> sets = flags.sets;
    const bool auto_micro_batch = take_auto_micro_batch(sets);
    Config cfg = run.resume.empty() ? resolve_config(r, sets) : resumed_config(r, run.resume, sets);
    if (auto_micro_batch && run.micro_batch > 0) {  // a launched rank: its launcher planned
        const LoopSpec* spec = r.loop_spec();
        LEVERS_CHECK(spec && !spec->micro_batch.empty(), "LEVERS_MICRO_BATCH: recipe '{}' has no micro-batch", r.name());
        cfg.set(spec->micro_batch, std::to_string(run.micro_batch));
    }
    LEVERS_CHECK(flags.threads >= 0, "--threads must be >= 0 (0: the cores shared among ranks), got {}", flags.threads);
    LEVERS_CHECK(flags.timeout_s > 0, "--timeout must be > 0 seconds, got {}", flags.timeout_s);
    LEVERS_CHECK(flags.restarts >= 0, "--restarts must be >= 0 (0: a failed job stays failed), got {}", flags.restarts);
    LEVERS_CHECK(flags.memory.empty() || auto_micro_batch, "--memory {} is what --set micro_batch=auto plans with; "
                 "add that, or leave --memory out", flags.memory);
    if (env.source == "levers") {
        run.compute = resolve_precision(flags.precision, env.device);
        cfg.set_run(run);
        return run_as_launched_rank(r, cfg, env, flags.timeout_s);  // the launcher checked the config
    }
    r.check(cfg);
    if (env.distributed()) {
        if (auto_micro_batch) {  // every rank plans alike
            const Device::Kind kind = resolve_device(flags.device, 1);
            run.grad_accum = choose_micro_batch(
                r, cfg, {.ranks = env.world_size, .device = kind, .compute = resolve_precision(flags.precision, kind),
                         .memory = flags.memory.empty() ? 0 : parse_memory_size(flags.memory)});
        }
        cfg.set_run(run);  // the rank resolves its device and precision, and rank 0 its directory
        return run_as_external_rank(r, std::move(cfg), env, flags, argc, argv);
    }

    const int gpus = flags.gpus.value_or(r.default_gpus());
    LEVERS_CHECK(gpus >= 1, "--gpus must be >= 1, got {}", gpus);
    const Device::Kind device = resolve_device(flags.device, gpus);
    run.compute = resolve_precision(flags.precision, device);
    if (auto_micro_batch) {  // planned once here; the ranks get the choice (run_exports)
        run.grad_accum = choose_micro_batch(r, cfg, {.ranks = gpus, .device = device, .compute = run.compute,
                                                     .memory = flags.memory.empty() ? 0 : parse_memory_size(flags.memory)});
        run.micro_batch = std::get<long>(cfg.value(r.loop_spec()->micro_batch));
    }
    if (!run.resume.empty())  // the saved global batch must split over this many ranks
        train::grad_accum_on(train::read_train_state(run.resume), gpus, run.resume);
    check_job_fits(gpus, device);
    if (!flags.out.empty())  // refused before anything waits or runs
        LEVERS_CHECK(!fs::exists(flags.out) || (fs::is_directory(flags.out) && fs::is_empty(flags.out)),
                     "--out {}: exists and is not an empty directory; give a new or empty one", flags.out);
    std::vector<int> slots;
    try {
        slots = take_slots(r, gpus, flags.threads, flags.wait, device);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 1;
    }
    const fs::path dir = make_run_dir(r.name(), flags.out);
    run.dir = dir;
    cfg.set_run(run);
    write_config(dir, r, cfg, gpus, argc, argv);
    const bool cuda = device == Device::Kind::cuda;
    const int cores = cuda ? available_cores() : static_cast<int>(slots.size());
    const int threads = flags.threads > 0 ? flags.threads : std::max(1, cores / gpus);
    announce_placement(r, gpus, threads, slots, device, run.compute, dir);
    // With restarts, even one rank runs as a process of its own: the launcher outlives its failure.
    if (gpus > 1 || flags.restarts > 0) return launch_ranks(r, flags, gpus, threads, device, slots, run, argc, argv);
    OutputTee tee(dir / "rank0.log");
    const Device in_place = cuda ? Device::cuda(runtime_index(slots[0])) : Device::cpu();
    return run_in_place(r, cfg, env, in_place, threads, [&](const Result& result) { publish_to(dir, result); });
}

namespace {

class RunCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* run = command_ = app.add_subcommand("run", "Run a recipe and print its result as JSON on the last line");
        run->add_option("name", flags_.name, "recipe name")->required();
        run->add_option("--set", flags_.sets, "set a parameter: --set name=value (repeatable)");
        run->add_option("--gpus", flags_.gpus, "ranks, one GPU each where there are GPUs, else CPU ranks sharing the "
                                               "cores (default: the recipe's)");
        add_device_option(*run, flags_.device, "where the ranks compute");
        add_precision_option(*run, flags_.precision, "what they compute in");
        run->add_option("--out", flags_.out, "run directory (default: runs/NAME/<date-time>)");
        run->add_option("--threads", flags_.threads, "CPU threads per rank (default 0: the job's core slots shared)");
        run->add_option("--output", flags_.output, "whose output to show: all ranks or rank0")
            ->check(CLI::IsMember({"all", "rank0"}));
        run->add_option("--timeout", flags_.timeout_s, "seconds a rank may wait in a collective (default 120)");
        run->add_option("--resume", resume_, "continue from a checkpoint: a file, a run directory, or latest (the "
                                             "newest run's)")
            ->expected(0, 1);
        run->add_option("--restarts", flags_.restarts, "when a rank fails, start the job again from its latest "
                                                       "checkpoint, this many times at most (default 0)");
        run->add_option("--memory", flags_.memory, "each rank's memory for --set micro_batch=auto, e.g. 80GB "
                                                   "(default: the GPU's, or the CPU's available memory shared by the "
                                                   "ranks)");
        run->add_flag("--no-wait", no_wait_, "fail at once if the GPUs are busy instead of queueing");
        run->footer(ex("\nExamples:\n  {recipe} run {pretrain} --set steps=300 --set batch_size=8\n"
                       "  {recipe} run {fine_tune} --gpus 8 --out runs/ft8\n"
                       "  {recipe} run {pretrain} --resume latest --set steps=8000\n"
                       "  {recipe} run {pretrain} --gpus 2 --restarts 3 --set checkpoint_every=100"));
    }
    int run(int argc, char** argv) override {
        flags_.wait = !no_wait_;
        if (command_->count("--resume") > 0) flags_.resume = resume_;
        return run_recipe(flags_, argc, argv);
    }

private:
    RunFlags flags_;
    std::string resume_;
    bool no_wait_ = false;
};

}  // namespace

std::unique_ptr<Command> run_command() { return std::make_unique<RunCommand>(); }

}  // namespace levers
