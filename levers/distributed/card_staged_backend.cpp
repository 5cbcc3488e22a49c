#include "levers/distributed/card_staged_backend.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/error.hpp"

#include <algorithm>

namespace levers::dist {

namespace {
std::size_t bytes_of(std::int64_t n, DType dtype) {
    LEVERS_CHECK(n >= 0, "a collective of {} elements", n);
    return static_cast<std::size_t>(n) * size_of(dtype);
}
}  // namespace

CardStagedBackend::CardStagedBackend(Backend& cards) : cards_(cards) {
    LEVERS_CHECK(cards.queues_on_card(), "host collectives staged through the card need a card group, not {}",
                 cards.name());
}

std::byte* CardStagedBackend::stage(std::size_t bytes) {
    if (bytes > capacity_) {
        buffer_ = device_alloc(bytes);
        capacity_ = bytes;
    }
    return buffer_.get();
}

void CardStagedBackend::all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) {
    const std::size_t bytes = bytes_of(n, dtype);
    std::byte* card = stage(std::max<std::size_t>(bytes, 1));  // an empty one is still collective
    if (bytes > 0) device_copy(card, data, bytes);
    cards_.all_reduce(card, n, dtype, op);
    if (bytes > 0) device_copy(data, card, bytes);
}

void CardStagedBackend::broadcast(void* data, std::size_t bytes, int root) {
    std::byte* card = stage(std::max<std::size_t>(bytes, 1));
    if (bytes > 0) device_copy(card, data, bytes);
    cards_.broadcast(card, bytes, root);
    if (bytes > 0) device_copy(data, card, bytes);
}

void CardStagedBackend::all_gather(void* out, const void* in, std::int64_t n, DType dtype) {
    const std::size_t bytes = bytes_of(n, dtype), all = bytes * static_cast<std::size_t>(world_size());
    std::byte* card = stage(std::max<std::size_t>(bytes + all, 1));
    if (bytes > 0) device_copy(card, in, bytes);
    cards_.all_gather(card + bytes, card, n, dtype);
    if (all > 0) device_copy(out, card + bytes, all);
}

void CardStagedBackend::reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) {
    const auto [begin, end] = chunk(n, world_size(), rank());
    const std::size_t bytes = bytes_of(n, dtype), mine = bytes_of(end - begin, dtype);
    std::byte* card = stage(std::max<std::size_t>(bytes + mine, 1));
    if (bytes > 0) device_copy(card, in, bytes);
    cards_.reduce_scatter(card + bytes, card, n, dtype, op);
    if (mine > 0) device_copy(out, card + bytes, mine);
}

}  // namespace levers::dist
