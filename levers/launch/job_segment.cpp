#include "levers/launch/job_segment.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/shm_backend.hpp"

#include <atomic>
#include <cstring>

namespace levers::launch {

namespace {
struct Header {
    std::atomic<std::uint32_t> result_ready;
    std::uint32_t result_length;
};
static_assert(sizeof(Header) <= 64);
}  // namespace

std::size_t JobSegment::bytes(int world, std::size_t slot_bytes) {
    return kHeaderBytes + dist::ShmBackend::segment_bytes(world, slot_bytes);
}

void JobSegment::initialize(void* memory, std::size_t bytes, int world, std::size_t slot_bytes) {
    new (memory) Header{};
    dist::ShmBackend::initialize(group_memory(memory), group_bytes(bytes), world, slot_bytes);
}

void* JobSegment::group_memory(void* memory) { return static_cast<std::byte*>(memory) + kHeaderBytes; }

void JobSegment::write_result(void* memory, const std::string& json) {
    LEVERS_CHECK(json.size() <= kResultBytes, "the result is {} bytes of JSON; at most {} fit", json.size(),
                 kResultBytes);
    auto* h = static_cast<Header*>(memory);
    std::memcpy(static_cast<std::byte*>(memory) + 64, json.data(), json.size());
    h->result_length = static_cast<std::uint32_t>(json.size());
    h->result_ready.store(1, std::memory_order_release);
}

std::optional<std::string> JobSegment::read_result(const void* memory) {
    const auto* h = static_cast<const Header*>(memory);
    if (h->result_ready.load(std::memory_order_acquire) == 0) return std::nullopt;
    return std::string(static_cast<const char*>(memory) + 64, h->result_length);
}

}  // namespace levers::launch
