// Passing NCCL's unique id from rank 0 to every rank through a Store (the
// shared-memory store on one node, the TCP store across nodes): rank 0 makes
// the id and sets it as hex text; the others wait for it. Kept apart from the
// NCCL backend so the exchange is tested where no GPU is.
#pragma once

#include "levers/distributed/store.hpp"

#include <functional>
#include <string>
#include <vector>

namespace levers::dist {


std::string to_hex(const std::vector<unsigned char>& bytes);
// Throws levers::Error if `text` is not hex of `expected` bytes.
std::vector<unsigned char> from_hex(const std::string& text, std::size_t expected);

// Rank 0 publishes `make()`'s bytes under `key`; every rank returns them.
std::vector<unsigned char> share_id(int rank, Store& store, const std::string& key,
                                    const std::function<std::vector<unsigned char>()>& make, std::size_t bytes);

}  // namespace levers::dist
