// Gloo's process group (TCP), for host collectives between nodes. Made by
// liblevers_gloo.so, opened beside liblevers when first needed: a job on one
// node never loads Gloo.
#pragma once

#include "levers/distributed/backend.hpp"
#include "levers/distributed/store.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace levers::dist {

// Collective over `world` ranks: joins them through `store` (keys under
// `prefix`), on this node's address `host`, or on network interface `iface`
// where given (GLOO_SOCKET_IFNAME). `member` names its ranks in messages
// ("rank", or "node" for a group of one leader per node). Throws
// levers::Error where this build has no Gloo backend, saying what to install.
std::unique_ptr<Backend> make_gloo_backend(int rank, int world, Store& store, const std::string& prefix,
                                           const std::string& member, const std::string& host,
                                           const std::string& iface, std::chrono::milliseconds timeout);

}  // namespace levers::dist

// What liblevers_gloo.so exports for it.
extern "C" levers::dist::Backend* levers_make_gloo_backend(int rank, int world, levers::dist::Store* store,
                                                          const char* prefix, const char* member, const char* host,
                                                          const char* iface, long timeout_ms);
