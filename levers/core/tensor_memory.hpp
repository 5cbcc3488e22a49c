// The bytes a process's tensors hold on one kind of device: the pools' blocks
// (in use or cached for reuse, levers/core/storage_pool.hpp) and the
// persistent buffers (parameters, gradients, optimizer state), with the most
// held at once. This is the figure `recipe plan` predicts and a run reports
// as its peak: what a GPU's allocator would have to give, whatever the
// process's other memory (code, libraries, file mappings, shared memory).
#pragma once

#include "levers/core/device.hpp"

#include <atomic>
#include <cstddef>

namespace levers {

class MemoryLedger {
public:
    void add(std::size_t bytes);
    void remove(std::size_t bytes);
    std::size_t held() const { return held_.load(std::memory_order_relaxed); }
    std::size_t peak() const { return peak_.load(std::memory_order_relaxed); }
    // The peak from now on starts at what is held now.
    void reset_peak() { peak_.store(held(), std::memory_order_relaxed); }

private:
    std::atomic<std::size_t> held_{0}, peak_{0};
};

// This process's ledger for tensors on `kind` (not a shape trace's: see shape_trace.hpp).
MemoryLedger& tensor_memory(Device::Kind kind);

}  // namespace levers
