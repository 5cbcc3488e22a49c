#include "levers/app/rank_join.hpp"

#include "levers/app/run_config.hpp"
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/core/output_tee.hpp"
#include "levers/core/threads.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/nccl_group.hpp"
#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/shm_segment.hpp"
#include "levers/launch/job_segment.hpp"
#include "levers/launch/rendezvous.hpp"
#include "levers/recipe/device_choice.hpp"
#include "levers/recipe/run_dir.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

namespace levers {

namespace fs = std::filesystem;

namespace {

void print_result(const Result& result) { fmt::print("{}\n", result_text(result)); }

// What a user reads of an exception: a levers::Error's message, without where in levers it was raised.
std::string user_line(const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    return error ? error->message() : e.what();
}

// The group for collectives on GPU memory: NCCL, its id passed through the
// host group's store.
std::unique_ptr<dist::Backend> gpu_group(dist::Backend& host_group, const launch::RankEnv& env, int gpu,
                                          std::chrono::milliseconds timeout) {
    dist::Store* store = host_group.store();
    LEVERS_CHECK(store, "GPU {}: the NCCL id travels through the group's store, and this job's group ({}) has none",
                 gpu, host_group.name());
    return dist::make_nccl_backend(env.rank, env.world_size, gpu, *store, timeout);
}

// Appends `line` to the rank's log in the run directory, not to the console:
// where in levers' source an error was raised is for whoever reads the logs.
void log_only(const fs::path& dir, int rank, const std::string& line) {
    if (dir.empty()) return;
    std::ofstream log(dir / fmt::format("rank{}.log", rank), std::ios::app);
    log << line << '\n';
}

// Runs the recipe as one rank of `group` (none: a world of one) on `device`
// with `threads` CPU threads; `publish` receives rank 0's result. On a GPU
// the NCCL group is `GPUs`, or made here from `group`'s store.
int run_in_group(const Recipe& r, const Config& cfg, const launch::RankEnv& env, std::unique_ptr<dist::Backend> group,
                 std::unique_ptr<dist::Backend> gpus, Device device, std::chrono::milliseconds timeout, int threads,
                 const std::function<void(const Result&)>& publish) {
    try {
        if (!device.is_cpu()) {
            use_gpu(device.index);  // before any other CUDA call of this rank: no stray context on GPU 0
            if (group && !gpus) gpus = gpu_group(*group, env, device.index, timeout);
        }
        dist::join({env.rank, env.world_size, env.local_rank, env.local_world_size, device}, std::move(group),
                   std::move(gpus));
        set_threads(threads);
        Result result = r.run(cfg);
        if (dist::is_main()) publish(result);
        dist::leave();
    } catch (const std::exception& e) {
        dist::leave();
        const std::string who = env.world_size > 1 ? fmt::format("rank {}: ", env.rank) : std::string();
        fmt::print(stderr, "error: {}recipe {} failed: {}\n", who, r.name(), user_line(e));
        if (const auto* error = dynamic_cast<const Error*>(&e))
            log_only(cfg.run().dir, env.rank, fmt::format("(raised at {})", error->where()));
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

}  // namespace

int run_in_place(const Recipe& r, const Config& cfg, const launch::RankEnv& env, Device device, int threads,
                 const std::function<void(const Result&)>& publish) {
    return run_in_group(r, cfg, env, nullptr, nullptr, device, std::chrono::milliseconds(0), threads, publish);
}

int run_as_launched_rank(const Recipe& r, const Config& cfg, const launch::RankEnv& env, double timeout_s) {
    std::optional<dist::ShmSegment> segment;
    std::unique_ptr<dist::ShmBackend> group;
    try {
        segment = dist::ShmSegment::open(env.segment);
        group = std::make_unique<dist::ShmBackend>(launch::JobSegment::group_memory(segment->data()),
                                                   launch::JobSegment::group_bytes(segment->size()), env.rank,
                                                   collective_timeout(env, timeout_s));
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: rank {}: cannot join the job: {}\n", env.rank, user_line(e));
        return 1;
    }
    const Device device = env.device == Device::Kind::cuda ? Device::cuda(env.local_rank) : Device::cpu();
    return run_in_group(r, cfg, env, std::move(group), nullptr, device, collective_timeout(env, timeout_s),
                        rank_threads(env),
                        [&](const Result& result) {
                            launch::JobSegment::write_result(segment->data(), result_text(result));
                        });
}

int run_as_external_rank(const Recipe& r, Config cfg, const launch::RankEnv& env, const RunFlags& flags, int argc,
                         char** argv) {
    RunContext run = cfg.run();
    const Device::Kind kind = resolve_device(flags.device, env.local_world_size);
    run.compute = resolve_precision(flags.precision, kind);
    // Each rank computes on the GPU of its local rank, as under torchrun.
    const Device device = kind == Device::Kind::cuda ? Device::cuda(env.local_rank) : Device::cpu();
    std::optional<launch::JoinedGroup> joined;
    try {
        if (!device.is_cpu()) use_gpu(device.index);  // before the NCCL group a job across nodes makes
        joined = launch::join_external(env, collective_timeout(env, flags.timeout_s),
                                       device.is_cpu() ? -1 : device.index);
    } catch (const std::exception& e) {
        fmt::print(stderr, "error: rank {}: cannot join the job: {}\n", env.rank, user_line(e));
        return 1;
    }
    // One run directory for the job: rank 0 makes it and tells the others. One
    // given in LEVERS_RUN_DIR (by recipe submit's script) is the job's already.
    const bool given = flags.out.empty() && !run.dir.empty();
    std::string dir = flags.out.empty() ? run.dir.string() : flags.out;
    std::array<char, 4096> path{};
    if (env.rank == 0) {
        if (given)
            fs::create_directories(dir);
        else
            dir = make_run_dir(r.name(), dir).string();
        LEVERS_CHECK(dir.size() < path.size(), "run directory path too long: {}", dir);
        std::copy(dir.begin(), dir.end(), path.begin());
        write_config(dir, r, cfg, env.world_size, argc, argv);
        const std::string through = joined->gpu_backend ? "NCCL (across nodes)" : joined->backend->name();
        fmt::print("recipe {}: rank 0 of {} started by {}, joined through {}; run directory {}\n", r.name(),
                   env.world_size, env.source, through, dir);
    }
    joined->backend->broadcast(path.data(), path.size(), 0);
    run.dir = path.data();
    cfg.set_run(run);
    fs::create_directories(run.dir);  // on another node's disk it is not there yet
    OutputTee tee(run.dir / fmt::format("rank{}.log", env.rank));
    const int threads = flags.threads > 0 ? flags.threads : rank_threads(env);  // --threads, as under levers' launcher
    return run_in_group(r, cfg, env, std::move(joined->backend), std::move(joined->gpu_backend), device,
                        collective_timeout(env, flags.timeout_s), threads, [&](const Result& result) {
                            write_json_file(run.dir / "result.json", result);
                            print_result(result);
                        });
}

}  // namespace levers
