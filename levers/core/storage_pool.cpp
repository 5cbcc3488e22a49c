#include "levers/core/storage_pool.hpp"

#include "levers/core/error.hpp"
#include "levers/core/out_of_memory.hpp"

#include <algorithm>
#include <bit>
#include <cstdlib>

namespace levers {

OutOfMemory::OutOfMemory(const std::string& where, std::size_t asked, const std::string& left)
    : Error("", fmt::format("out of memory on {}: {:.1f} MiB asked for{}", where, asked / 1048576.0, left)),
      asked_(asked) {}

StoragePool::StoragePool(Allocate allocate, Release release, Describe describe_full, std::string where,
                         MemoryLedger* ledger)
    : allocate_(allocate), release_(release), describe_full_(describe_full), where_(std::move(where)), ledger_(ledger) {}

StoragePool::~StoragePool() {
    // Blocks tensors still hold are freed by their deleters when those let go.
    std::lock_guard lock(mutex_);
    blocks_.clear();
}

std::size_t StoragePool::rounded(std::size_t bytes) {
    if (bytes <= 512) return std::max<std::size_t>(64, (bytes + 63) / 64 * 64);
    // A quarter of the octave below: at most 25% more than asked for.
    const std::size_t step = std::bit_floor(bytes) / 4;
    return (bytes + step - 1) / step * step;
}

std::shared_ptr<std::byte> StoragePool::make(std::size_t size) {
    void* p = allocate_(size);
    if (!p) {  // hand the free blocks back, then try once more
        release_free();
        p = allocate_(size);
    }
    if (!p) throw OutOfMemory(where_, size, describe_full_ ? describe_full_() : std::string());
    if (ledger_) ledger_->add(size);
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p),
                                      [release = release_, ledger = ledger_, size](std::byte* q) {
                                          release(q, size);
                                          if (ledger) ledger->remove(size);
                                      });
}

std::shared_ptr<std::byte> StoragePool::take(std::size_t bytes) {
    const std::size_t size = rounded(bytes);
    std::lock_guard lock(mutex_);
    // A free block of this class: steps of one shape ask for the same classes
    // in the same order, so the second step reuses the first's blocks exactly.
    if (auto it = blocks_.find(size); it != blocks_.end())
        for (auto& block : it->second)
            if (block.use_count() == 1) return block;
    auto block = make(size);
    blocks_[size].push_back(block);
    held_ += size;
    ++allocations_;
    peak_ = std::max(peak_, held_);
    return block;
}

void StoragePool::release_cached() {
    std::lock_guard lock(mutex_);
    release_free();
}

void StoragePool::release_free() {
    for (auto& [size, list] : blocks_) {
        const auto free = std::partition(list.begin(), list.end(), [](const auto& b) { return b.use_count() > 1; });
        held_ -= size * static_cast<std::size_t>(list.end() - free);
        list.erase(free, list.end());
    }
}

MemoryStats StoragePool::stats() {
    std::lock_guard lock(mutex_);
    MemoryStats s;
    for (const auto& [size, list] : blocks_)
        for (const auto& b : list) (b.use_count() > 1 ? s.in_use : s.cached) += size;
    s.peak = peak_;
    s.allocations = allocations_;
    return s;
}

void StoragePool::reset_peak() {
    std::lock_guard lock(mutex_);
    peak_ = held_;
}

StoragePool& cpu_pool() {
    static StoragePool* pool = new StoragePool(  // never destroyed: tensors may outlive static destruction
        [](std::size_t bytes) { return std::aligned_alloc(64, bytes); }, [](void* p, std::size_t) { std::free(p); },
        nullptr, "the CPU", &tensor_memory(Device::Kind::cpu));
    return *pool;
}

}  // namespace levers
