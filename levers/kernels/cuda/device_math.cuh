// What the kernel files share: loading storage types into their accumulator
// type and back, and reductions over a warp and over a block. Reductions run
// in a fixed tree order, so a result never depends on timing.
#pragma once

#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/core/device_memory.hpp"
#include "levers/kernels/cuda/ops.hpp"

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <type_traits>

namespace levers::kernels::cuda {

__device__ inline float load(bf16 x) { return __bfloat162float(x); }
__device__ inline float load(float x) { return x; }
__device__ inline double load(double x) { return x; }
__device__ inline std::int32_t load(std::int32_t x) { return x; }
__device__ inline bool load(bool x) { return x; }
__device__ inline std::int32_t load(std::uint8_t x) { return x; }

template <class S> __device__ S store(acc_t<S> x) {
    if constexpr (sizeof(S) == 2)
        return __float2bfloat16_rn(x);
    else
        return x;
}

constexpr unsigned kFullWarp = 0xffffffffu;

// Every lane of a full warp must call these; every lane gets the result.
template <class T> __device__ T warp_sum(T value) {
    for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullWarp, value, offset);
    return value;
}
template <class T> __device__ T warp_max(T value) {
    for (int offset = 16; offset > 0; offset /= 2) {
        const T other = __shfl_xor_sync(kFullWarp, value, offset);
        value = other > value ? other : value;
    }
    return value;
}

// The sum (or max) of one value per thread over a block of `kThreads`
// threads (a power of two, the block's size) by a tree in shared memory.
// Every thread of the block must call it; every thread gets the result.
template <int kThreads, bool kMax = false, class T> __device__ T block_reduce(T value) {
    __shared__ T partial[kThreads];
    __syncthreads();  // an earlier call's readers are done with `partial`
    partial[threadIdx.x] = value;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            const T other = partial[threadIdx.x + half];
            if constexpr (kMax)
                partial[threadIdx.x] = other > partial[threadIdx.x] ? other : partial[threadIdx.x];
            else
                partial[threadIdx.x] += other;
        }
        __syncthreads();
    }
    return partial[0];
}
template <int kThreads, class T> __device__ T block_sum(T value) { return block_reduce<kThreads, false>(value); }
template <int kThreads, class T> __device__ T block_max(T value) { return block_reduce<kThreads, true>(value); }

// Calls launch(std::integral_constant<int, T>{}) with T = kNarrow threads for a
// row of at most 8 kNarrow items, else kWide: a short row's block would
// otherwise idle most of its threads through its reductions.
template <int kNarrow, int kWide, class Launch> void with_row_threads(index_t items, Launch&& launch) {
    if (items <= 8 * kNarrow)
        launch(std::integral_constant<int, kNarrow>{});
    else
        launch(std::integral_constant<int, kWide>{});
}

// Scratch memory for one op from the GPU's caching arena
// (levers/core/device_memory): back in the cache when the op returns, while
// its kernels may still run; the next user queues behind them on the same
// stream (every op of a process runs on its compute stream).
template <class T> class Scratch {
public:
    explicit Scratch(std::size_t n) : memory_(device_alloc(n * sizeof(T) + 1)) {}
    T* get() const { return reinterpret_cast<T*>(memory_.get()); }

private:
    std::shared_ptr<std::byte> memory_;
};

// Launches, then checks the launch (a bad configuration fails here, naming the call site).
#define LEVERS_LAUNCH(...)                            \
    do {                                              \
        __VA_ARGS__;                                  \
        LEVERS_CUDA_CHECK(cudaGetLastError());        \
    } while (0)

inline unsigned blocks_for(index_t n, int threads) { return static_cast<unsigned>((n + threads - 1) / threads); }

// Element-wise kernels move W consecutive elements per thread in one load
// where the arrays allow it: Pack<S, W> is aligned to its whole size, so a
// 16-byte pack (8 bf16, 4 float, 2 double) is one vector load or store.
template <class S> constexpr int kPack = 16 / static_cast<int>(sizeof(S));
template <class S, int W> struct alignas(sizeof(S) * W) Pack {
    S v[W];
};
template <int W, class S> __device__ Pack<std::remove_const_t<S>, W> load_pack(S* at) {
    return *reinterpret_cast<const Pack<std::remove_const_t<S>, W>*>(at);
}
template <int W, class S> __device__ void store_pack(S* at, const Pack<S, W>& p) {
    *reinterpret_cast<Pack<S, W>*>(at) = p;
}

// Whether every pointer is 16-byte aligned (what the widest packs need).
inline bool aligned16(std::initializer_list<const void*> pointers) {
    for (const void* p : pointers)
        if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
    return true;
}

// Thread t applies op to elements [W·t, W·t + W): op.template apply<W>(i)
// with packs, or one by one (apply<1>) for the last, partial group.
template <int W, class Op> __global__ void map_kernel(Op op, index_t n) {
    const index_t first = (blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x) * W;
    if (first + W <= n)
        op.template apply<W>(first);
    else
        for (index_t i = first; i < n; ++i) op.template apply<1>(i);
}

// Runs op over n elements, W at a time where `packed` (the arrays are
// aligned16), else one at a time.
template <int W, class Op> void map(const Op& op, index_t n, bool packed, cudaStream_t stream) {
    constexpr int kThreads = 256;
    if (n <= 0) return;
    if (packed)
        LEVERS_LAUNCH(map_kernel<W><<<blocks_for((n + W - 1) / W, kThreads), kThreads, 0, stream>>>(op, n));
    else
        LEVERS_LAUNCH(map_kernel<1><<<blocks_for(n, kThreads), kThreads, 0, stream>>>(op, n));
}

}  // namespace levers::kernels::cuda
