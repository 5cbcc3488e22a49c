// A bump allocator for tensors that live for one step (activations, scratch).
//
// alloc() is a pointer bump; reset() makes all memory reusable at once. Blocks
// stay alive while any tensor still refers to them, but after reset() the old
// tensors alias new ones: callers reset only when the previous step's tensors
// are dead (the models do this when the batch shape changes).
#pragma once

#include "framework/core/device.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace levers {

class Arena {
public:
    static constexpr std::size_t kAlign = 64;  // cache line / AVX-512 vector

    explicit Arena(std::size_t block_bytes = std::size_t{1} << 20) : block_bytes_(block_bytes) {}

    // Returns `bytes` of kAlign-aligned, uninitialised CPU memory.
    std::shared_ptr<std::byte> alloc(std::size_t bytes);

    // Makes every byte reusable. If the last cycle needed several blocks they are
    // merged into one, so steady-state steps do a single allocation-free pass.
    void reset();

    std::size_t used_bytes() const;      // handed out since the last reset
    std::size_t capacity_bytes() const;  // held from the system

private:
    struct Block {
        std::shared_ptr<std::byte> data;
        std::size_t size = 0;
        std::size_t used = 0;
    };
    Block make_block(std::size_t bytes) const;

    std::size_t block_bytes_;
    std::vector<Block> blocks_;
};

}  // namespace levers
