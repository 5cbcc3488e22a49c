// Memory on the GPU this process computes on, and the one stream its work is
// queued on, through the GPU backend (device_runtime.hpp). Allocations come
// from a StoragePool over the GPU's memory, so a training step's steady
// state makes no cudaMalloc or cudaFree calls (they synchronise the whole
// GPU). A block goes back to the pool while kernels queued on the compute
// stream may still use it: the next user queues on the same stream, after
// them. Without a GPU backend every function fails with an error saying why.
#pragma once

#include "levers/core/storage_pool.hpp"

#include <cstddef>
#include <memory>

namespace levers {

// `bytes` of uninitialised memory on the current GPU (use_gpu).
std::shared_ptr<std::byte> device_alloc(std::size_t bytes);

// The same outside the pool: its own allocation, released when the last owner lets go.
std::shared_ptr<std::byte> device_alloc_unpooled(std::size_t bytes);

// The process's compute stream (a cudaStream_t) on the current GPU: ops,
// the optimizer and tensor copies queue their work on it, so they are
// ordered without synchronising.
void* compute_stream();

// Copies between host and GPU in any direction; returns when the bytes have arrived.
void device_copy(void* dst, const void* src, std::size_t bytes);
// Zeroes `bytes` of GPU memory (queued on the compute stream).
void device_zero(void* dst, std::size_t bytes);
// Waits for the compute stream.
void device_synchronize();

// The GPU pool's bytes: held by tensors, kept free, the most held.
MemoryStats device_memory_stats();
void reset_device_memory_peak();
// Returns the cached free blocks to the GPU.
void release_cached_device_memory();

}  // namespace levers
