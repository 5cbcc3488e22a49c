#include "framework/core/arena.hpp"

#include "framework/core/error.hpp"

#include <cstdlib>
#include <numeric>

namespace levers {

namespace {
std::size_t round_up(std::size_t n) { return (n + Arena::kAlign - 1) / Arena::kAlign * Arena::kAlign; }
}  // namespace

Arena::Block Arena::make_block(std::size_t bytes) const {
    bytes = round_up(bytes);
    void* p = std::aligned_alloc(kAlign, bytes);
    LEVERS_CHECK(p != nullptr, "out of memory: could not allocate {} bytes for an arena block", bytes);
    return {std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [](std::byte* q) { std::free(q); }), bytes, 0};
}

std::shared_ptr<std::byte> Arena::alloc(std::size_t bytes) {
    bytes = round_up(bytes == 0 ? 1 : bytes);
    if (blocks_.empty() || blocks_.back().size - blocks_.back().used < bytes)
        blocks_.push_back(make_block(std::max(bytes, block_bytes_)));
    Block& b = blocks_.back();
    std::shared_ptr<std::byte> out(b.data, b.data.get() + b.used);  // aliasing: keeps the block alive
    b.used += bytes;
    return out;
}

void Arena::reset() {
    if (blocks_.size() > 1) {
        std::size_t total = capacity_bytes();
        blocks_.clear();
        blocks_.push_back(make_block(total));
    }
    for (Block& b : blocks_) b.used = 0;
}

std::size_t Arena::used_bytes() const {
    return std::accumulate(blocks_.begin(), blocks_.end(), std::size_t{0},
                           [](std::size_t s, const Block& b) { return s + b.used; });
}

std::size_t Arena::capacity_bytes() const {
    return std::accumulate(blocks_.begin(), blocks_.end(), std::size_t{0},
                           [](std::size_t s, const Block& b) { return s + b.size; });
}

}  // namespace levers
