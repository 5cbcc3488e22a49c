// A shape trace: while one is open, this process runs ops for their shapes
// alone. Tensors get address space that is never touched (reserved, not
// committed: an 8B model's weights cost nothing), kernels, copies and fills
// do nothing, and a ledger per device kind counts what the tensors would
// hold, through pools that round and cache exactly as the real ones do. A
// GPU is not needed to trace one: nothing reaches the GPU runtime. What
// `recipe plan` measures a step with (levers/recipe/memory_plan.hpp).
//
// Element values are meaningless inside a trace, except in tensors host code
// filled and copies of them up to kTracedCopyBytes (token ids, positions,
// targets: what ops read on the host to size their work), and tensors made in
// one must not be used after it closes. One trace at a time, opened
// and closed on one thread while no other thread computes.
#pragma once

#include "levers/core/storage_pool.hpp"
#include "levers/core/tensor_memory.hpp"

#include <cstddef>
#include <memory>

namespace levers {

// Copies inside a trace are made up to this size, skipped beyond it.
inline constexpr std::size_t kTracedCopyBytes = std::size_t{1} << 20;

class ShapeTrace {
public:
    ShapeTrace();  // throws levers::Error if one is open already
    ~ShapeTrace();
    ShapeTrace(const ShapeTrace&) = delete;
    ShapeTrace& operator=(const ShapeTrace&) = delete;

    // What the traced tensors on `kind` hold now and at most.
    MemoryLedger& memory(Device::Kind kind) { return state_->ledgers[static_cast<int>(kind)]; }
    StoragePool& pool(Device::Kind kind) { return *state_->pools[static_cast<int>(kind)]; }
    // A persistent buffer's memory (Tensor::persistent), counted until its last owner lets go.
    std::shared_ptr<std::byte> persistent(Device::Kind kind, std::size_t bytes);

private:
    // Kept after the trace closes (a few hundred bytes): a cache somewhere may
    // still hold a traced tensor, whose release reaches its pool and ledger.
    struct State {
        MemoryLedger ledgers[Device::kKinds];
        std::unique_ptr<StoragePool> pools[Device::kKinds];
    };
    State* state_;
};

// The open trace, or null (the common case: one relaxed load).
ShapeTrace* shape_trace();
inline bool shape_tracing() { return shape_trace() != nullptr; }

}  // namespace levers
