// The layout of a process group's shared-memory segment (internal to distributed/:
// the backend and the store both work on it).
#pragma once

#include "levers/distributed/shm_backend.hpp"

#include <atomic>
#include <cstdint>

namespace levers::dist {

inline constexpr std::size_t kAlign = 64;

struct alignas(kAlign) RankRecord {
    std::atomic<std::uint64_t> heartbeat_ns;
    std::atomic<std::uint64_t> seq;       // collectives entered
    std::atomic<std::uint32_t> op;        // the current one's kind
    std::atomic<std::uint64_t> count;     // and its element or byte count
    std::atomic<std::uint64_t> arrivals;  // barrier arrivals, inside collectives too
    std::atomic<std::int32_t> pid;
};

// One key of the store. state: 0 free, 1 being written, 2 ready. A value is
// written once; counters (add) live in `counter` and change atomically.
struct alignas(kAlign) StoreEntry {
    static constexpr std::size_t kKeyBytes = 64, kValueBytes = 1024;
    std::atomic<std::uint32_t> state;
    std::uint32_t key_length, value_length;
    std::atomic<std::uint32_t> has_value;
    std::atomic<std::int64_t> counter;
    char key[kKeyBytes];
    char value[kValueBytes];
};

struct ShmBackend::Layout {
    static constexpr int kStoreEntries = 128;
    std::atomic<std::uint64_t> magic;  // written last by initialize()
    std::uint32_t version, world;
    std::uint64_t slot_bytes;
    alignas(kAlign) std::atomic<std::uint32_t> arrived;
    alignas(kAlign) std::atomic<std::uint32_t> generation;
    // 0: running; else rank + 1 (kMaxRanks + 1: the launcher), 0xffffffff while the reason is written.
    alignas(kAlign) std::atomic<std::uint32_t> aborted_by;
    char abort_reason[256];
    // Bit r: a rank timed out waiting for rank r (written before aborted_by).
    alignas(kAlign) std::atomic<std::uint64_t> stalled;
    RankRecord ranks[kMaxRanks];
    alignas(kAlign) std::atomic<std::uint32_t> store_version;  // bumped (and woken) on every store change
    StoreEntry store[kStoreEntries];
};

}  // namespace levers::dist
