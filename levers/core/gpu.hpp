// The node's NVIDIA GPUs as the GPU backend (device_runtime.hpp) sees them.
// Without a CUDA build, without NVIDIA's driver (the backend is then never
// opened), or where the runtime reports no usable GPU (no driver: error 35,
// no device: error 100), the node has none: callers fall back to the CPU,
// and GPU tests skip.
#pragma once

#include <string>
#include <vector>

namespace levers {

// GPUs this process may use (CUDA_VISIBLE_DEVICES applies); 0 without any.
int gpu_count();
// GPUs on this node whatever CUDA_VISIBLE_DEVICES says (the driver's
// /proc/driver/nvidia/gpus entries; gpu_count() where that is missing): the
// slot ledger's ids are these physical indices.
int node_gpu_count();
// Their names ("NVIDIA H200"), in index order.
std::vector<std::string> gpu_names();
// Makes GPU `index` this process's current device: call before any other
// CUDA call so no context lands on GPU 0 by accident. Throws levers::Error
// naming the index and the count if it is out of range.
void use_gpu(int index);
// Whether this build has the CUDA backend.
bool built_with_cuda();

}  // namespace levers
