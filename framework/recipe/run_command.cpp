#include "framework/recipe/run_command.hpp"

#include "framework/core/environment.hpp"
#include "framework/core/error.hpp"
#include "framework/core/gpu.hpp"
#include "framework/core/output_tee.hpp"
#include "framework/core/threads.hpp"
#include "framework/dist/context.hpp"
#include "framework/dist/nccl_group.hpp"
#include "framework/dist/shm_segment.hpp"
#include "framework/launch/card_ledger.hpp"
#include "framework/launch/env_contract.hpp"
#include "framework/launch/job_segment.hpp"
#include "framework/launch/launcher.hpp"
#include "framework/launch/rendezvous.hpp"
#include "framework/recipe/checkpoints.hpp"
#include "framework/recipe/device_choice.hpp"
#include "framework/recipe/run_dir.hpp"
#include "framework/train/train_state.hpp"
#include "framework/recipe/workspace.hpp"

#include <fmt/chrono.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <unistd.h>

namespace levers {

namespace fs = std::filesystem;

Config apply_sets(Config cfg, const std::vector<std::string>& sets) {
    for (const auto& kv : sets) {
        auto eq = kv.find('=');
        LEVERS_CHECK(eq != std::string::npos && eq > 0, "--set expects name=value, got '{}'", kv);
        cfg.set(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return cfg;
}

Config resolve_config(const Plan& r, const std::vector<std::string>& sets) { return apply_sets(r.defaults(), sets); }

namespace {

// A resumed run's config: the checkpoint's, then the --set flags on top. The
// whole file is read (and checked) here, so a corrupted checkpoint is refused
// before anything starts, not by the ranks.
Config resumed_config(const Plan& r, const fs::path& checkpoint, const std::vector<std::string>& sets) {
    const auto state = train::read_train_state(checkpoint);
    Config cfg = r.defaults();
    const nlohmann::json saved = state.file.metadata.value("config", nlohmann::json::object());
    for (const auto& [name, value] : saved.items()) {
        if (!cfg.has(name)) continue;  // a parameter the recipe no longer declares
        std::string text;
        if (value.is_string()) {
            text = value.get<std::string>();
        } else if (value.is_array()) {
            for (const auto& x : value) {
                if (!text.empty()) text += ',';
                text += x.dump();
            }
        } else {
            text = value.dump();
        }
        cfg.set(name, text);
    }
    return apply_sets(std::move(cfg), sets);
}

std::string result_text(const Result& result) {
    // Generated text can hold any bytes: replace invalid UTF-8 rather than fail.
    return result.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_result(const Result& result) { fmt::print("{}\n", result_text(result)); }

void write_config(const fs::path& dir, const Plan& r, const Config& cfg, int ranks, int argc, char** argv) {
    nlohmann::json j = {{"recipe", r.name()},
                        {"params", cfg.to_json()},
                        {"ranks", ranks},
                        {"command", std::vector<std::string>(argv, argv + argc)},
                        {"started", fmt::format("{:%Y-%m-%dT%H:%M:%S%z}", fmt::localtime(std::time(nullptr)))}};
    if (!resume_from().empty()) j["resumed_from"] = resume_from().string();
    write_json_file(dir / "config.json", j);
}

// The group for collectives on card memory: NCCL, its id passed through the
// host group's store.
std::unique_ptr<dist::Backend> card_group(dist::Backend& host_group, const launch::RankEnv& env, int card,
                                          std::chrono::milliseconds timeout) {
    dist::Store* store = host_group.store();
    LEVERS_CHECK(store, "card {}: the NCCL id travels through the group's store, and this job's group ({}) has none",
                 card, host_group.name());
    return dist::make_nccl_backend(env.rank, env.world_size, card, *store, timeout);
}

// Appends `line` to the rank's log in the run directory, not to the console:
// where in levers' source an error was raised is for whoever reads the logs.
void log_only(int rank, const std::string& line) {
    if (run_dir().empty()) return;
    std::ofstream log(run_dir() / fmt::format("rank{}.log", rank), std::ios::app);
    log << line << '\n';
}

// Runs the recipe as one rank of `group` (none: a world of one) on `device`
// with `threads` CPU threads; `publish` receives rank 0's result. On a card
// the NCCL group is `cards`, or made here from `group`'s store.
int run_in_group(const Plan& r, const Config& cfg, const launch::RankEnv& env, std::unique_ptr<dist::Backend> group,
                 std::unique_ptr<dist::Backend> cards, Device device, std::chrono::milliseconds timeout, int threads,
                 const std::function<void(const Result&)>& publish) {
    try {
        if (!device.is_cpu()) {
            use_gpu(device.index);  // before any other CUDA call of this rank: no stray context on card 0
            if (group && !cards) cards = card_group(*group, env, device.index, timeout);
        }
        dist::join({env.rank, env.world_size, env.local_rank, env.local_world_size, device}, std::move(group),
                   std::move(cards));
        set_threads(threads);
        Result result = r.run(cfg);
        if (dist::is_main()) publish(result);
        dist::leave();
    } catch (const std::exception& e) {
        dist::leave();
        const std::string who = env.world_size > 1 ? fmt::format("rank {}: ", env.rank) : std::string();
        const auto* error = dynamic_cast<const Error*>(&e);
        fmt::print(stderr, "error: {}recipe {} failed: {}\n", who, r.name(), error ? error->message() : e.what());
        if (error) log_only(env.rank, fmt::format("(raised at {})", error->where()));
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
// back through the segment, and the launcher prints it and logs the output.
int run_as_launched_rank(const Plan& r, const Config& cfg, const launch::RankEnv& env, double timeout_s) {
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
    const Device device = env.device == "cuda" ? Device::cuda(env.local_rank) : Device::cpu();
    return run_in_group(r, cfg, env, std::move(group), nullptr, device, collective_timeout(env, timeout_s),
                        rank_threads(env),
                        [&](const Result& result) {
                            launch::JobSegment::write_result(segment->data(), result_text(result));
                        });
}

// This process is one rank of a job torchrun, Slurm or mpirun started: each
// rank logs its own output; rank 0 writes the config and result and prints it.
int run_as_external_rank(const Plan& r, const Config& cfg, const launch::RankEnv& env, const RunFlags& flags,
                         int argc, char** argv) {
    const std::string device_kind = resolve_device(flags.device, env.local_world_size);
    set_compute_dtype(resolve_precision(flags.precision, device_kind));
    // Each rank computes on the card of its local rank, as under torchrun.
    const Device device = device_kind == "cuda" ? Device::cuda(env.local_rank) : Device::cpu();
    std::optional<launch::JoinedGroup> joined;
    try {
        if (!device.is_cpu()) use_gpu(device.index);  // before the NCCL group a job across nodes makes
        joined = launch::join_external(env, collective_timeout(env, flags.timeout_s),
                                       device.is_cpu() ? -1 : device.index);
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: rank {}: cannot join the job: {}\n", env.rank, e.what());
        return 1;
    }
    // One run directory for the job: rank 0 makes it and tells the others.
    std::string dir = flags.out.empty() ? run_dir().string() : flags.out;
    std::array<char, 4096> path{};
    if (env.rank == 0) {
        dir = make_run_dir(r.name(), dir).string();
        LEVERS_CHECK(dir.size() < path.size(), "run directory path too long: {}", dir);
        std::copy(dir.begin(), dir.end(), path.begin());
        write_config(dir, r, cfg, env.world_size, argc, argv);
        fmt::print("recipe {}: rank 0 of {} started by {}, joined through {}; run directory {}\n", r.name(),
                   env.world_size, env.source, joined->card_backend ? "NCCL (across nodes)" : "shared memory", dir);
    }
    joined->backend->broadcast(path.data(), path.size(), 0);
    set_run_dir(path.data());
    fs::create_directories(run_dir());  // on another node's disk it is not there yet
    OutputTee tee(run_dir() / fmt::format("rank{}.log", env.rank));
    return run_in_group(r, cfg, env, std::move(joined->backend), std::move(joined->card_backend), device,
                        collective_timeout(env, flags.timeout_s), rank_threads(env), [&](const Result& result) {
                            write_json_file(run_dir() / "result.json", result);
                            print_result(result);
                        });
}

// The cards this job runs on: given by the sweep that started it, else taken
// from the node's ledger (waiting for them unless --no-wait). On CPU the
// cards are core slots: a job takes ranks x threads of them, or all.
std::vector<int> take_cards(const Plan& r, int ranks, int threads, bool wait, bool cuda) {
    if (const char* given = env::get("LEVERS_CARDS"))
        return parse_int_list("LEVERS_CARDS", given, 0);
    auto ledger = launch::CardLedger::for_node(cuda ? node_gpu_count() : 0);
    // A CPU job uses every core unless --threads says how many per rank.
    const int slots = static_cast<int>(ledger.cards().size());
    const int need = ledger.kind() != "cpu" ? ranks : threads > 0 ? std::min(slots, ranks * threads) : slots;
    launch::job_lease() = ledger.acquire(need, r.name(), wait, [](const std::string& what) {
        fmt::print("recipe: {}\n", what);
        std::fflush(stdout);
    });
    return launch::job_lease().cards();
}

}  // namespace

int run_recipe(const RunFlags& flags, int argc, char** argv) {
    Plan r = find_recipe(flags.name);
    const auto env = launch::read_rank_env();
    // The checkpoint to resume from: found once by whoever started the job (its ranks read LEVERS_RESUME).
    if (env.source != "levers" && flags.resume) {
        LEVERS_CHECK(r.framework_loop(), "--resume: recipe '{}' owns its loop (.run), so levers cannot resume it",
                     r.name());
        set_resume_from(fs::absolute(find_checkpoint(flags.resume->empty() ? "latest" : *flags.resume, r.name())));
    }
    Config cfg = resume_from().empty() ? resolve_config(r, flags.sets) : resumed_config(r, resume_from(), flags.sets);
    LEVERS_CHECK(flags.threads >= 0, "--threads must be >= 0 (0: the cores shared among ranks), got {}", flags.threads);
    LEVERS_CHECK(flags.timeout_s > 0, "--timeout must be > 0 seconds, got {}", flags.timeout_s);
    set_device_was_auto(flags.device == "auto");
    if (env.source == "levers") {
        set_compute_dtype(resolve_precision(flags.precision, env.device));
        return run_as_launched_rank(r, cfg, env, flags.timeout_s);  // the launcher checked the config
    }
    r.check(cfg);
    if (env.distributed()) return run_as_external_rank(r, cfg, env, flags, argc, argv);
    const int gpus = flags.gpus.value_or(r.default_gpus());
    LEVERS_CHECK(gpus >= 1, "--gpus must be >= 1, got {}", gpus);
    const std::string device = resolve_device(flags.device, gpus);
    set_compute_dtype(resolve_precision(flags.precision, device));
    const bool cuda = device == "cuda";
    const NodeCards node = node_cards(device);
    load_workspace().check(gpus, node.count, node.unit);
    // As mpirun would: more CPU ranks than cores run, but each shares a core.
    if (!cuda && gpus > node.count && !env::get("LEVERS_CARDS"))
        fmt::print("recipe: {} ranks on {} CPU slot{}: ranks share cores (oversubscribed), so each runs slower\n", gpus,
                   node.count, node.count == 1 ? "" : "s");

    if (!flags.out.empty())  // refused before anything waits or runs
        LEVERS_CHECK(!fs::exists(flags.out) || (fs::is_directory(flags.out) && fs::is_empty(flags.out)),
                     "--out {}: exists and is not an empty directory; give a new or empty one", flags.out);
    std::vector<int> cards;
    try {
        cards = take_cards(r, gpus, flags.threads, flags.wait, cuda);
    } catch (const Error& e) {
        fmt::print(stderr, "error: {}\n", e.message());
        return 1;
    }
    const fs::path dir = make_run_dir(r.name(), flags.out);
    set_run_dir(dir);
    write_config(dir, r, cfg, gpus, argc, argv);
    const int slots = static_cast<int>(cards.size());
    const int threads = flags.threads > 0 ? flags.threads : std::max(1, (cuda ? available_cores() : slots) / gpus);
    if (cuda)
        fmt::print("recipe {}: {} {} on card{} {} ({}), {}; run directory {}\n", r.name(), gpus,
                   gpus == 1 ? "process" : "ranks", slots == 1 ? "" : "s", fmt::join(cards, ","),
                   gpu_names().at(static_cast<std::size_t>(runtime_index(cards[0]))), name_of(compute_dtype()),
                   dir.string());
    else
        fmt::print("recipe {}: {} CPU {}, {} thread{} each, on slot{} {}; run directory {}\n", r.name(), gpus,
                   gpus == 1 ? "process" : "ranks", threads, threads == 1 ? "" : "s", slots == 1 ? "" : "s",
                   fmt::join(cards, ","), dir.string());
    std::fflush(stdout);

    auto publish = [&](const Result& result) {
        write_json_file(dir / "result.json", result);
        print_result(result);
    };
    if (gpus == 1) {
        OutputTee tee(dir / "rank0.log");
        const Device in_place = cuda ? Device::cuda(runtime_index(cards[0])) : Device::cpu();
        return run_in_group(r, cfg, env, nullptr, nullptr, in_place, std::chrono::milliseconds(0), threads, publish);
    }
    launch::LaunchOptions options;
    options.program = fs::read_symlink("/proc/self/exe").string();
    options.args.assign(argv + 1, argv + argc);
    options.ranks = gpus;
    options.threads_per_rank = threads;
    options.device = device;
    if (cuda) options.cuda_cards = cards;
    options.timeout = std::chrono::milliseconds(static_cast<long>(flags.timeout_s * 1000));
    options.all_output = flags.output == "all";
    options.log_dir = dir;
    options.live_progress = console_is_terminal();
    auto outcome = launch::launch(options);
    if (outcome.exit_code == 0 && outcome.result) publish(Result::parse(*outcome.result));
    return outcome.exit_code;
}

}  // namespace levers
