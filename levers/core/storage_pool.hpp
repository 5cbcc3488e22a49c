// Memory for tensors, cached: a block goes back to its pool when the last
// tensor using it goes away, and the next request of a similar size takes it
// again, so steady training steps (the same shapes every step) neither
// allocate nor free, on the CPU and on GPUs, and a step's temporaries reuse
// each other's memory as a caching allocator does (PyTorch's, for GPUs).
//
// A block is free when the pool's own reference is its only one: no
// callback and no control block is made per tensor (handing a block out is
// a copy of the pool's std::shared_ptr). Sizes round up to a quarter octave
// (at most 25% more than asked for); a request takes a free block of its
// class. (Taking larger ones too let one class's blocks serve another's
// requests differently from step to step, and the pool kept growing for
// several steps: each new block a page-fault pass over fresh memory.)
#pragma once

#include "levers/core/tensor_memory.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace levers {

struct MemoryStats {
    std::size_t in_use = 0;   // held by tensors now
    std::size_t cached = 0;   // free, kept for reuse
    std::size_t peak = 0;     // the most the pool has held (in use + cached) since reset_peak()
    std::size_t allocations = 0;  // blocks obtained from the system so far
};

class StoragePool {
public:
    // `allocate` returns null when the memory is exhausted; `release` frees
    // (given the size allocated). `describe_full` says, for the error, what
    // is left. `ledger` (optional) is told every block obtained and freed.
    using Allocate = void* (*)(std::size_t bytes);
    using Release = void (*)(void* p, std::size_t bytes);
    using Describe = std::string (*)();
    StoragePool(Allocate allocate, Release release, Describe describe_full, std::string where,
                MemoryLedger* ledger = nullptr);
    ~StoragePool();
    StoragePool(const StoragePool&) = delete;
    StoragePool& operator=(const StoragePool&) = delete;

    // `bytes` of uninitialised memory, 64-byte aligned. Throws levers::Error
    // naming the size and what is free when even an empty cache cannot hold it.
    std::shared_ptr<std::byte> take(std::size_t bytes);
    // Frees every block no tensor holds.
    void release_cached();
    MemoryStats stats();
    void reset_peak();

    static std::size_t rounded(std::size_t bytes);  // the class a request falls in

private:
    std::shared_ptr<std::byte> make(std::size_t size);  // with mutex_ held
    void release_free();                                 // with mutex_ held
    std::mutex mutex_;
    std::map<std::size_t, std::vector<std::shared_ptr<std::byte>>> blocks_;  // by rounded size
    Allocate allocate_;
    Release release_;
    Describe describe_full_;
    std::string where_;
    MemoryLedger* ledger_;
    std::size_t held_ = 0, peak_ = 0, allocations_ = 0;
};

// The CPU's pool (aligned_alloc).
StoragePool& cpu_pool();

}  // namespace levers
