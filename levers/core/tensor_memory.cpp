#include "levers/core/tensor_memory.hpp"

#include <algorithm>

namespace levers {

void MemoryLedger::add(std::size_t bytes) {
    const std::size_t now = held_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    std::size_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
}

void MemoryLedger::remove(std::size_t bytes) { held_.fetch_sub(bytes, std::memory_order_relaxed); }

MemoryLedger& tensor_memory(Device::Kind kind) {
    static MemoryLedger ledgers[Device::kKinds];  // trivially destructible counters: safe during exit
    return ledgers[static_cast<int>(kind)];
}

}  // namespace levers
