// NCCL's process group (nccl_backend.hpp), made by the GPU backend library
// (levers/core/device_runtime.hpp): CPU work never loads NCCL.
#pragma once

#include "levers/distributed/backend.hpp"
#include "levers/distributed/nccl_id.hpp"

#include <chrono>
#include <memory>

namespace levers::dist {

// Selects GPU `device`, applies the GPU quirks and joins the communicator
// of `world` ranks (rank 0's id through `store`). Throws levers::Error where
// this build or machine has no GPU backend, saying why.
std::unique_ptr<Backend> make_nccl_backend(int rank, int world, int device, Store& store,
                                           std::chrono::milliseconds timeout);

}  // namespace levers::dist

// What the GPU backend library exports for it.
extern "C" levers::dist::Backend* levers_make_nccl_backend(int rank, int world, int device,
                                                          levers::dist::Store* store, long timeout_ms);
