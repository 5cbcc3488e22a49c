// Collectives that run while the caller goes on, as c10d's Work: each queued
// collective is a Work handle, and waiting for one waits for those queued
// before it too (they run in order). One interface for both carriers: a GPU
// group queues them on its own stream, each after the compute stream's work
// so far (NcclBackend::make_queue); a host group runs them on a communication
// thread (make_thread_queue). Gradient buckets use it to overlap backward,
// ZeRO's gathered parameters to overlap the next forward.
#pragma once

#include "levers/distributed/backend.hpp"

#include <cstdint>
#include <memory>

namespace levers::dist {

struct Work {
    std::uint64_t ticket = 0;  // 1, 2, ... in the order queued; 0: nothing
};

class CollectiveQueue {
public:
    virtual ~CollectiveQueue() = default;

    // Queues an in-place all-reduce of n elements at `data`, to run after
    // everything queued before it. Collective: every rank queues the same ones.
    virtual Work all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) = 0;
    // Queues a reduce-scatter in place: this rank's chunk (Backend::chunk) of
    // the n elements at `data` receives the reduction over ranks; the rest of
    // them is left as it is or reduced too (a GPU's queue all-reduces).
    virtual Work reduce_scatter(void* data, std::int64_t n, DType dtype, ReduceOp op) = 0;
    // Queues an in-place all-gather: data[world * n], every rank's n elements
    // at data + rank * n sent to every rank (Backend::all_gather_in_place).
    virtual Work all_gather(void* data, std::int64_t n, DType dtype) = 0;
    // Returns when `w` and everything queued before it are done (within the
    // group's timeout); rethrows the failure of any of them.
    virtual void wait(Work w) = 0;
    // The time the queue's own thread spent in collectives, and the part of it
    // waiting for other ranks, so far: already counted in the group's timing(),
    // but not by the caller's thread. Zero where a GPU's stream runs them.
    virtual Backend::Timing busy() const = 0;
};

// A communication thread that runs `group`'s blocking collectives in order.
// `group` must outlive the queue.
std::unique_ptr<CollectiveQueue> make_thread_queue(Backend& group);

}  // namespace levers::dist
