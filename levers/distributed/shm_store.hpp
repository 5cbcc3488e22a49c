// A key-value store in a process group's shared-memory segment, for the ranks
// of one node (c10d's Store, without a server): set, get (waits until the key
// exists), add (an atomic counter), wait (for several keys), each bounded by
// the group's timeout. Keys are at most 64 bytes, values at most 1 KiB, 128
// keys per job; a key's value is set once (a second set with another value
// is refused), and get on a key made by add returns its count as text.
// Lock-free: a dead rank cannot block the others.
#pragma once

#include "levers/distributed/store.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace levers::dist {

class ShmBackend;

class ShmStore final : public Store {
public:
    // Obtained from ShmBackend::store().
    ShmStore(void* layout, std::chrono::milliseconds timeout) : layout_(layout), timeout_(timeout) {}

    void set(const std::string& key, const std::string& value) override;
    std::string get(const std::string& key) override;
    std::int64_t add(const std::string& key, std::int64_t delta) override;
    void wait(const std::vector<std::string>& keys);

private:
    // The entry for `key`, claiming a free one if `create`; null if absent and not created.
    void* entry(const std::string& key, bool create);
    void changed();

    void* layout_;
    std::chrono::milliseconds timeout_;
};

}  // namespace levers::dist
