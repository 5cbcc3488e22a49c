// Runs a function as every rank of a shared-memory group, one real process
// per rank (this process is rank 0, the others are forked), for tests of the
// collectives below the launcher.
#pragma once

#include "levers/distributed/shm_backend.hpp"
#include "levers/distributed/shm_segment.hpp"

#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace levers::testing {

// fn(backend) returns whether this rank saw what it expected; a throw counts as
// not ok. Returns every rank's ok (children by exit code); rank 0's exception
// message goes to *rank0_error.
inline std::vector<bool> run_ranks(int world, std::size_t slot_bytes, std::chrono::milliseconds timeout,
                                   const std::function<bool(dist::ShmBackend&)>& fn, std::string* rank0_error = nullptr) {
    const std::size_t bytes = dist::ShmBackend::segment_bytes(world, slot_bytes);
    auto segment = dist::ShmSegment::create(dist::ShmSegment::unique_name(), bytes);
    dist::ShmBackend::initialize(segment.data(), bytes, world, slot_bytes);
    std::vector<pid_t> children;
    for (int r = 1; r < world; ++r) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            bool ok = false;
            try {
                auto mapped = dist::ShmSegment::open(segment.name());
                dist::ShmBackend backend(mapped.data(), mapped.size(), r, timeout);
                ok = fn(backend);
            } catch (...) {
                ok = false;
            }
            _exit(ok ? 0 : 1);
        }
        children.push_back(pid);
    }
    std::vector<bool> ok(static_cast<std::size_t>(world));
    try {
        dist::ShmBackend backend(segment.data(), segment.size(), 0, timeout);
        ok[0] = fn(backend);
    } catch (const std::exception& e) {
        if (rank0_error) *rank0_error = e.what();
    }
    for (int r = 1; r < world; ++r) {
        int status = 0;
        waitpid(children[static_cast<std::size_t>(r - 1)], &status, 0);
        ok[static_cast<std::size_t>(r)] = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    return ok;
}

}  // namespace levers::testing
