// The emulated GPU's launches. A block's threads are fibers (Boost.Context) on
// the calling host thread: each runs until it waits at a barrier or its
// kernel returns, then the first thread in turn order that can run goes on.
// A thread that reads what another writes without a barrier between them
// then reads it unwritten, or overwritten, in one of the two turn orders
// (shared and device memory start as 0xff bytes: NaN in every float type),
// and the results show it. Blocks run one after another, each with fresh
// barriers and its dynamic shared memory refilled; that memory is the bytes
// asked for, rounded up to 128 (AddressSanitizer sees a read past them).
#include "emulated_gpu.hpp"

#include <boost/context/fiber.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/common_interface_defs.h>
#endif

namespace levers::emulation {

uint3 thread_index, block_index;
unsigned linear_thread;
Launch* running;
cudaError_t launch_error = cudaSuccess;

namespace {

namespace context = boost::context;

constexpr std::size_t kStackBytes = 64 << 10;  // WMMA fragments are whole 16x16 matrices here (1 KiB each)
// Hands a thread's own stack (made once per host thread, reused by every launch) to Boost.Context.
struct OwnStack {
    char* memory;
    context::stack_context allocate() {
        context::stack_context c;
        c.size = kStackBytes;
        c.sp = memory + kStackBytes;
        return c;
    }
    void deallocate(context::stack_context&) noexcept {}
};

struct Fiber {
    std::unique_ptr<char[]> stack{new char[kStackBytes]};
    context::fiber self;    // resumes this thread
    context::fiber caller;  // resumes the scheduler, while this thread runs
    bool done = false;
    const Barrier* waiting = nullptr;  // and the phase it waits to end
    unsigned long phase = 0;
};

struct Scheduler {
    std::vector<Fiber>& fibers;
    const std::function<void()>* kernel = nullptr;
    unsigned current = 0;
    bool barriers_opened = false;  // since the scheduler last looked
};
Scheduler* scheduler = nullptr;

// The host thread's stack, learnt on the first switch away from it.
const void* host_stack = nullptr;
std::size_t host_stack_size = 0;

// Switches to `to` (on `stack`) until something switches back; `to` then
// holds what resumes it next. AddressSanitizer follows the switch when told.
void resume(context::fiber& to, const void* stack, std::size_t stack_size) {
#if defined(__SANITIZE_ADDRESS__)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, stack, stack_size);
    to = std::move(to).resume();
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    (void)stack, (void)stack_size;
    to = std::move(to).resume();
#endif
}

void fresh_block(Launch& l) {
    l.block_barrier = Barrier{l.threads};
    l.warp_barriers.clear();
    for (unsigned first = 0; first < l.threads; first += 32) l.warp_barriers.push_back(Barrier{std::min(32u, l.threads - first)});
    l.products.assign(l.warp_barriers.size(), WarpProduct{});
    l.product_calls.assign(l.threads, 0);
    l.loads.assign(l.warp_barriers.size(), WarpProduct{});
    l.load_calls.assign(l.threads, 0);
    std::memset(l.dynamic_shared, 0xff, l.shared_bytes);
}

// A thread's life: its kernel, then it leaves its barriers' counts.
context::fiber start(Fiber& f) {
    return context::fiber(std::allocator_arg, OwnStack{f.stack.get()}, [&f](context::fiber&& caller) {
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_finish_switch_fiber(nullptr, &host_stack, &host_stack_size);
#endif
        f.caller = std::move(caller);
        (*scheduler->kernel)();
        running->block_barrier.leave();
        running->warp_barriers[linear_thread / 32].leave();
        f.done = true;
#if defined(__SANITIZE_ADDRESS__)
        __sanitizer_start_switch_fiber(nullptr, host_stack, host_stack_size);
#endif
        return std::move(f.caller);
    });
}

bool runnable(const Fiber& f) { return !f.done && !(f.waiting && f.waiting->phase == f.phase); }

// The first thread in turn order that can run gets the turn, so one warp
// runs as far as it can (to the block's barrier, or its end) before the
// next starts, and within a warp the lanes go one after another between
// warp barriers: far more skew than a GPU's, on purpose.
void run_block(Launch& l, Scheduler& s, bool descending) {
    fresh_block(l);
    for (unsigned t = 0; t < l.threads; ++t) {
        Fiber& f = s.fibers[t];
        f.done = false;
        f.waiting = nullptr;
        f.self = start(f);
    }
    const auto in_turn = [&](unsigned i) { return descending ? l.threads - 1 - i : i; };
    unsigned i = 0;
    for (unsigned left = l.threads; left > 0;) {
        // Threads before i became runnable only if a barrier opened since: then look from the start.
        if (s.barriers_opened) i = 0;
        s.barriers_opened = false;
        while (i < l.threads && !runnable(s.fibers[in_turn(i)])) ++i;
        if (i == l.threads) {
            std::fprintf(stderr, "emulated GPU: block (%u, %u, %u) deadlocked: threads wait at a barrier that the "
                         "others never reach\n", block_index.x, block_index.y, block_index.z);
            std::abort();
        }
        const unsigned t = in_turn(i);
        Fiber& f = s.fibers[t];
        f.waiting = nullptr;
        s.current = t;
        linear_thread = t;
        thread_index = {t % l.block.x, t / l.block.x % l.block.y, t / (l.block.x * l.block.y)};
        resume(f.self, f.stack.get(), kStackBytes);
        if (f.done) --left;
    }
}

}  // namespace

void Barrier::open() {
    arrived = 0;
    ++phase;
    scheduler->barriers_opened = true;
}

void Barrier::arrive_and_wait() {
    if (++arrived == count) return open();  // the last arrival keeps its turn
    Fiber& f = scheduler->fibers[scheduler->current];
    f.waiting = this;
    f.phase = phase;
    resume(f.caller, host_stack, host_stack_size);  // back to the scheduler until the phase ends
}

void Barrier::leave() {
    if (--count > 0 && arrived == count) open();
}

bool launchable(dim3 grid, dim3 block, std::size_t shared_bytes) {
    const unsigned long long threads = 1ull * block.x * block.y * block.z;
    if (threads > 0 && threads <= 1024 && block.z <= 64 && grid.x > 0 && grid.y > 0 && grid.z > 0 &&
        grid.y <= 65535 && grid.z <= 65535 && shared_bytes <= (227u << 10))
        return true;
    std::fprintf(stderr, "emulated GPU: launch of grid (%u, %u, %u), block (%u, %u, %u), %zu bytes shared refused\n",
                 grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes);
    launch_error = cudaErrorInvalidConfiguration;
    return false;
}

void run(dim3 grid, dim3 block, std::size_t shared_bytes, const std::function<void()>& kernel) {
    if (running) {
        std::fprintf(stderr, "emulated GPU: a launch from inside a kernel\n");
        std::abort();
    }
    Launch l;
    l.grid = grid;
    l.block = block;
    l.shared_bytes = shared_bytes;
    l.threads = block.x * block.y * block.z;
    l.slots.resize(l.threads);
    // The bytes asked for, rounded up to 128 (aligned_alloc's rule): AddressSanitizer sees a read past them.
    const std::size_t shared_allocated = (std::max<std::size_t>(shared_bytes, 1) + 127) / 128 * 128;
    l.dynamic_shared = static_cast<unsigned char*>(std::aligned_alloc(128, shared_allocated));
    // The threads' stacks, made by the first launch of this many threads on this host thread and kept: making
    // 1,024 stacks of 64 KiB at every launch took a fifth of a small model's emulated run.
    thread_local std::vector<Fiber> fibers;
    if (fibers.size() < l.threads) fibers.resize(l.threads);
    Scheduler s{fibers};
    s.kernel = &kernel;
    scheduler = &s;
    running = &l;
    // Turns go from the last thread down in even blocks and from the first
    // up in odd ones: a missing barrier shows whichever side writes first.
    unsigned long long b = 0;
    for (unsigned z = 0; z < grid.z; ++z)
        for (unsigned y = 0; y < grid.y; ++y)
            for (unsigned x = 0; x < grid.x; ++x, ++b) {
                block_index = {x, y, z};
                run_block(l, s, b % 2 == 0);
            }
    running = nullptr;
    scheduler = nullptr;
    std::free(l.dynamic_shared);
}

}  // namespace levers::emulation
