// The shared-memory segment of one multi-rank job: a header holding rank 0's
// result, then the process group's area (see levers/distributed/shm_backend.hpp).
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace levers::launch {

struct JobSegment {
    static constexpr std::size_t kResultBytes = 1 << 16;
    static constexpr std::size_t kHeaderBytes = kResultBytes + 64;

    static std::size_t bytes(int world, std::size_t slot_bytes);
    // Lays out a fresh zero-filled segment (the launcher, before spawning).
    static void initialize(void* memory, std::size_t bytes, int world, std::size_t slot_bytes);
    static void* group_memory(void* memory);
    static std::size_t group_bytes(std::size_t bytes) { return bytes - kHeaderBytes; }
    // Rank 0 publishes the job's result (JSON text, at most kResultBytes).
    static void write_result(void* memory, const std::string& json);
    // The launcher reads it after the ranks exit; empty if none was written.
    static std::optional<std::string> read_result(const void* memory);
};

}  // namespace levers::launch
