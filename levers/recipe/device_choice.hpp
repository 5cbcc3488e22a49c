// Where `recipe run` computes: --device auto|cpu|cuda (and --precision) against
// what this build and node have, and which CUDA runtime index a GPU of the node's ledger is.
#pragma once

#include "levers/core/device.hpp"
#include "levers/core/dtype.hpp"

#include <string>

namespace levers {

// What --device (auto, cpu or cuda) means here: auto is cuda where this build
// has CUDA and a GPU is visible. Throws levers::Error (exit 2) for cuda
// without either, naming which is missing, and for `ranks` more than the
// visible GPUs.
Device::Kind resolve_device(const std::string& flag, int ranks);

// The dtype models compute in for --precision f32|bf16 on `device`. Throws
// levers::Error (exit 2) for bf16 on the CPU and for other names.
DType resolve_precision(const std::string& flag, Device::Kind device);

// What a job on `device` can have of this node: the visible GPUs, or the
// CPU slots of the slot ledger, and what they are called.
struct NodeSlots {
    int count = 0;
    const char* unit = "CPU slots";  // or "GPUs"
};
NodeSlots node_slots(Device::Kind device);

// The CUDA runtime's index, under this process's CUDA_VISIBLE_DEVICES, of the
// node's GPU `GPU` (a physical index, as the slot ledger hands out).
int runtime_index(int gpu);

}  // namespace levers
