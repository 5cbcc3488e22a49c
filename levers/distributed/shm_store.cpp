#include "levers/distributed/shm_store.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/futex.hpp"
#include "levers/distributed/shm_layout.hpp"

#include <cstring>
#include <functional>
#include <thread>

namespace levers::dist {

namespace {
using Layout = ShmBackend::Layout;

bool key_is(const StoreEntry& e, const std::string& key) {
    return e.key_length == key.size() && std::memcmp(e.key, key.data(), key.size()) == 0;
}
}  // namespace

void ShmStore::changed() {
    auto* l = static_cast<Layout*>(layout_);
    l->store_version.fetch_add(1, std::memory_order_acq_rel);
    futex_wake_all(&l->store_version);
}

void* ShmStore::entry(const std::string& key, bool create) {
    LEVERS_CHECK(!key.empty() && key.size() <= StoreEntry::kKeyBytes, "store key '{}' must be 1 to {} bytes", key,
                 StoreEntry::kKeyBytes);
    auto* l = static_cast<Layout*>(layout_);
    // Every rank probes the same sequence from the key's hash, so two ranks
    // creating one key meet at the same entry.
    const std::size_t start = std::hash<std::string>{}(key) % Layout::kStoreEntries;
    for (int probe = 0; probe < Layout::kStoreEntries; ++probe) {
        StoreEntry& e = l->store[(start + static_cast<std::size_t>(probe)) % Layout::kStoreEntries];
        std::uint32_t state = e.state.load(std::memory_order_acquire);
        if (state == 0) {
            if (!create) return nullptr;  // keys are never removed: a free entry ends the probe
            std::uint32_t expected = 0;
            if (e.state.compare_exchange_strong(expected, 1, std::memory_order_acq_rel)) {
                std::memcpy(e.key, key.data(), key.size());
                e.key_length = static_cast<std::uint32_t>(key.size());
                e.state.store(2, std::memory_order_release);
                return &e;
            }
            state = expected;
        }
        while (state == 1) {  // another rank is writing this entry's key: a few instructions
            std::this_thread::yield();
            state = e.state.load(std::memory_order_acquire);
        }
        if (key_is(e, key)) return &e;
    }
    LEVERS_FAIL("the shared-memory store is full ({} keys)", static_cast<int>(Layout::kStoreEntries));
}

void ShmStore::set(const std::string& key, const std::string& value) {
    LEVERS_CHECK(value.size() <= StoreEntry::kValueBytes, "store value for '{}' is {} bytes; at most {} fit", key,
                 value.size(), StoreEntry::kValueBytes);
    auto* e = static_cast<StoreEntry*>(entry(key, true));
    std::uint32_t none = 0;
    // has_value: 0 none, 1 being written, 2 set, 3 a counter (add).
    if (e->has_value.compare_exchange_strong(none, 1, std::memory_order_acq_rel)) {
        std::memcpy(e->value, value.data(), value.size());
        e->value_length = static_cast<std::uint32_t>(value.size());
        e->has_value.store(2, std::memory_order_release);
        changed();
        return;
    }
    LEVERS_CHECK(get(key) == value, "store key '{}' is already set to another value (values are set once)", key);
}

std::string ShmStore::get(const std::string& key) {
    auto* l = static_cast<Layout*>(layout_);
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
        const std::uint32_t version = l->store_version.load(std::memory_order_acquire);
        if (auto* e = static_cast<StoreEntry*>(entry(key, false))) {
            const std::uint32_t has = e->has_value.load(std::memory_order_acquire);
            if (has == 2) return std::string(e->value, e->value_length);
            if (has == 3) return std::to_string(e->counter.load(std::memory_order_acquire));
        }
        const auto left = deadline - std::chrono::steady_clock::now();
        LEVERS_CHECK(left > std::chrono::nanoseconds::zero(), "store key '{}' was not set within {} ms", key,
                     timeout_.count());
        futex_wait(&l->store_version, version,
                   std::min<std::chrono::nanoseconds>(left, std::chrono::milliseconds(100)));
    }
}

std::int64_t ShmStore::add(const std::string& key, std::int64_t delta) {
    auto* e = static_cast<StoreEntry*>(entry(key, true));
    const std::int64_t now = e->counter.fetch_add(delta, std::memory_order_acq_rel) + delta;
    std::uint32_t none = 0;
    e->has_value.compare_exchange_strong(none, 3, std::memory_order_acq_rel);  // 3: a counter
    changed();
    return now;
}

void ShmStore::wait(const std::vector<std::string>& keys) {
    for (const auto& k : keys) get(k);
}

}  // namespace levers::dist
