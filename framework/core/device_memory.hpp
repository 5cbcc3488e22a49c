// Memory on the card this process computes on, and the one stream its work is
// queued on. Allocations come from cudaMalloc through a small cache: a freed
// block goes back to a free list of its (rounded) size and the next request
// of that size takes it, so a training step's steady state makes no
// cudaMalloc or cudaFree calls (they synchronise the whole card). No managed
// memory. Without a CUDA build every function fails with an error saying so.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace levers {

// `bytes` of uninitialised memory on the current card (use_gpu), released into
// the cache when the last owner lets go. Throws levers::Error naming the size
// and the card's free memory when it does not fit.
std::shared_ptr<std::byte> device_alloc(std::size_t bytes);

// The process's compute stream (a cudaStream_t) on the current card, made on
// first use: models, optimizer and tensor copies queue their work on it, so
// they are ordered without synchronising.
void* compute_stream();

// Copies between host and card in any direction (cudaMemcpyDefault); returns
// when the bytes have arrived.
void device_copy(void* dst, const void* src, std::size_t bytes);
// Zeroes `bytes` of card memory (queued on the compute stream).
void device_zero(void* dst, std::size_t bytes);

// One card allocation carved into 256-byte aligned pieces, for a model's
// activations: layout(block) calls block.take<T>(n) for every piece, once to
// count (the pointers are null) and once more over the allocation. A layout
// that fits the block it has (a shorter sequence while sampling, a smaller
// last batch) is carved from it again: no allocation, no synchronisation.
class CarvedBlock {
public:
    template <class Layout> void lay_out(const Layout& layout) {
        std::shared_ptr<std::byte> kept = std::move(memory_);  // null while counting
        used_ = 0;
        layout(*this);
        if (!kept || used_ > capacity_) {
            kept.reset();  // back to the cache first, so a same-sized block is reused
            kept = device_alloc(used_);
            capacity_ = used_;
        }
        memory_ = std::move(kept);
        used_ = 0;
        layout(*this);
    }
    template <class T = float> T* take(std::int64_t elems) {
        T* p = memory_ ? reinterpret_cast<T*>(memory_.get() + used_) : nullptr;
        used_ += (static_cast<std::size_t>(elems) * sizeof(T) + 255) / 256 * 256;
        return p;
    }
    std::size_t bytes() const { return used_; }

private:
    std::shared_ptr<std::byte> memory_;
    std::size_t used_ = 0, capacity_ = 0;
};

// Bytes held by the cache: handed out, and kept free for reuse.
struct DeviceMemoryStats {
    std::size_t in_use = 0, cached = 0;
};
DeviceMemoryStats device_memory_stats();
// Returns the cached free blocks to the card.
void release_cached_device_memory();

}  // namespace levers
