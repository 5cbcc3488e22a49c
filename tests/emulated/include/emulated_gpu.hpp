// A CUDA GPU emulated on the host, for running levers' kernels where no
// GPU is: every thread of a block is a fiber, __syncthreads and __syncwarp
// are barriers, shuffles pass through per-lane slots, blocks run one after
// another, and launches, copies and products wait on their stream until
// something waits for them. Kernel files see it through this header
// (included before anything else) and rewrite_launches.py (launch syntax).
// It checks logic, indexing and synchronisation (under the sanitizers:
// out-of-bounds reads, misaligned vector loads; a missing barrier, through
// the order the threads take turns in; a missing stream wait, through the
// order streams run in), not the hardware: timing, occupancy and register
// limits are a real GPU's to show.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <functional>
#include <utility>
#include <vector>

namespace levers::emulation {

// A block's barrier (__syncthreads, or one warp's __syncwarp). Threads are
// fibers taking turns on one host thread: arriving before the last one
// gives the turn back; a thread whose kernel has returned leaves the count.
struct Barrier {
    unsigned count = 0, arrived = 0;
    unsigned long phase = 0;
    void arrive_and_wait();
    void leave();
    void open();  // ends the phase: its waiting threads may run again
};

// A warp's result of its n-th warp-wide product (WMMA): the first lane to
// make the call computes it, the others copy it, as every lane would get
// the same matrix.
struct WarpProduct {
    unsigned long call = 0;
    float value[16 * 16];
};

// One kernel launch: its shape and what its threads share.
struct Launch {
    dim3 grid, block;
    std::size_t shared_bytes = 0;
    unsigned threads = 0;
    Barrier block_barrier;
    std::vector<Barrier> warp_barriers;
    std::vector<std::array<unsigned char, 16>> slots;  // one per thread, for shuffles
    std::vector<WarpProduct> products;                 // one per warp
    std::vector<unsigned long> product_calls;          // one per thread
    std::vector<WarpProduct> loads;                    // one per warp: a fragment loaded once for its lanes
    std::vector<unsigned long> load_calls;             // one per thread
    unsigned char* dynamic_shared = nullptr;
};

// The running thread's place in the running launch.
extern uint3 thread_index, block_index;
extern unsigned linear_thread;
extern Launch* running;
// What cudaGetLastError reports: a launch the GPU would refuse.
extern cudaError_t launch_error;

// Runs `kernel` (the kernel called with its arguments) over the grid, now.
void run(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& kernel);
// Whether a GPU would launch this shape (over 1024 threads, grid y or z
// past 65535 or over 227 KiB of shared memory it refuses at the launch).
bool launchable(dim3 grid, dim3 block, std::size_t shared_bytes);

// Streams as a GPU orders them: work queued on a stream runs when the host
// waits for it (a synchronising call, a copy to host memory) or when another
// stream's queued wait on an event needs it, never merely because it was
// queued first. Work on two streams that no event orders runs in whichever
// order the waits ask for: a missing cudaStreamWaitEvent shows as data read
// before it is written. The legacy default stream (0) and the streams made
// without cudaStreamNonBlocking wait for each other, as CUDA's do.
void enqueue(cudaStream_t stream, std::function<void()> work);
void finish(cudaStream_t stream);  // runs everything queued on it so far
void finish_all();                 // every stream (cudaDeviceSynchronize, cudaFree)

// Counts of what was asked (stats.cpp; LEVERS_EMULATED_STATS writes them at exit).
void count_launch();
void count_product();
void count_copy();
void count_memset();
void count_malloc(std::size_t bytes);

// A kernel launch: checked when it is made (cudaGetLastError reports it),
// run on its stream in turn. The arguments are copied at the launch, as a
// GPU's are.
struct Launcher {
    dim3 grid, block;
    std::size_t shared_bytes;
    cudaStream_t stream;
    template <class Kernel, class... Args> void operator()(Kernel kernel, Args... args) const {
        if (!launchable(grid, block, shared_bytes)) return;
        count_launch();
        enqueue(stream, [grid = grid, block = block, shared = shared_bytes, kernel, args...] {
            run(grid, block, shared, [&] { kernel(args...); });
        });
    }
};
inline Launcher launch(dim3 grid, dim3 block, std::size_t shared_bytes = 0, cudaStream_t stream = nullptr) {
    return {grid, block, shared_bytes, stream};
}

// Opaque handles (streams, events, cuBLAS and NCCL handles) that only need to be distinct.
template <class Handle> Handle make_handle() { return reinterpret_cast<Handle>(new int(0)); }
template <class Handle> void drop_handle(Handle h) { delete reinterpret_cast<int*>(h); }

inline unsigned char* dynamic_shared() { return running->dynamic_shared; }
inline void sync_block() { running->block_barrier.arrive_and_wait(); }
inline void sync_warp() { running->warp_barriers[linear_thread / 32].arrive_and_wait(); }
inline unsigned lane() { return linear_thread % 32; }

// Each lane leaves its value in its slot; once the warp has, each reads its
// partner's; the second barrier keeps the slots until every lane has read.
template <class T> T shuffle_xor(T value, int mask) {
    static_assert(sizeof(T) <= 16);
    Launch& l = *running;
    std::memcpy(l.slots[linear_thread].data(), &value, sizeof value);
    sync_warp();
    const unsigned partner = linear_thread / 32 * 32 + (lane() ^ static_cast<unsigned>(mask));
    T other;
    std::memcpy(&other, l.slots[partner].data(), sizeof other);
    sync_warp();
    return other;
}

}  // namespace levers::emulation

// CUDA's device-side words, as the host sees them. __shared__ arrays are
// static: one block runs at a time, and all its threads see the same array.
#undef __shared__
#define __shared__ static
#undef __global__
#define __global__
#define __launch_bounds__(...)
#define threadIdx (::levers::emulation::thread_index)
#define blockIdx (::levers::emulation::block_index)
#define blockDim (::levers::emulation::running->block)
#define gridDim (::levers::emulation::running->grid)

inline void __syncthreads() { levers::emulation::sync_block(); }
inline void __syncwarp(unsigned = 0xffffffffu) { levers::emulation::sync_warp(); }
template <class T> T __shfl_xor_sync(unsigned, T value, int mask, int = 32) {
    return levers::emulation::shuffle_xor(value, mask);
}
inline float __expf(float x) { return std::exp(x); }

// Kernels are launched through the emulator, which takes no function pointer:
// the attribute call only checks what a GPU would.
template <class T> cudaError_t cudaFuncSetAttribute(T*, cudaFuncAttribute, int value) {
    return value <= (227 << 10) ? cudaSuccess : cudaErrorInvalidValue;
}
