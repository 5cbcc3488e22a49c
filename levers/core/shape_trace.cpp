#include "levers/core/shape_trace.hpp"

#include "levers/core/error.hpp"

#include <atomic>
#include <sys/mman.h>

namespace levers {

namespace {

std::atomic<ShapeTrace*> open_trace{nullptr};

// Address space only: the pages are committed if someone writes them (host
// code filling a small batch does), never by the traced kernels.
void* reserve(std::size_t bytes) {
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}
void unreserve(void* p, std::size_t bytes) { ::munmap(p, bytes); }

}  // namespace

ShapeTrace::ShapeTrace() : state_(new State) {
    for (int k = 0; k < Device::kKinds; ++k)
        state_->pools[k] = std::make_unique<StoragePool>(
            reserve, unreserve, nullptr, name_of(static_cast<Device::Kind>(k)) + std::string(" (traced)"),
            &state_->ledgers[k]);
    ShapeTrace* none = nullptr;
    LEVERS_CHECK(open_trace.compare_exchange_strong(none, this), "a shape trace is open already: one at a time");
}

ShapeTrace::~ShapeTrace() {
    open_trace.store(nullptr);
    for (auto& pool : state_->pools) pool->release_cached();  // state_ itself stays (see the header)
}

std::shared_ptr<std::byte> ShapeTrace::persistent(Device::Kind kind, std::size_t bytes) {
    void* p = reserve(bytes);
    LEVERS_CHECK(p != nullptr, "a shape trace could not reserve {:.1f} GiB of address space", bytes / 1073741824.0);
    MemoryLedger* ledger = &memory(kind);
    ledger->add(bytes);
    return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [ledger, bytes](std::byte* q) {
        unreserve(q, bytes);
        ledger->remove(bytes);
    });
}

ShapeTrace* shape_trace() { return open_trace.load(std::memory_order_relaxed); }

}  // namespace levers
