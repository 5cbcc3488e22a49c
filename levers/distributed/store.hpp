// The key-value store a process group's ranks rendezvous through, c10d's
// Store: the shared-memory one within a node (ShmStore), the TCP one across
// nodes (TcpStore). What travels through it is small: ids, addresses, counts.
#pragma once

#include <cstdint>
#include <string>

namespace levers::dist {

class Store {
public:
    virtual ~Store() = default;
    virtual void set(const std::string& key, const std::string& value) = 0;
    // Waits until `key` is set (bounded by the store's timeout; throws levers::Error naming the key).
    virtual std::string get(const std::string& key) = 0;
    // Adds `delta` to the integer at `key` (0 if absent) and returns the new value.
    virtual std::int64_t add(const std::string& key, std::int64_t delta) = 0;
};

}  // namespace levers::dist
