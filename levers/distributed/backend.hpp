// The collectives a process group offers, whatever carries them: shared
// memory between the processes of one node (ShmBackend), NCCL between GPUs
// (NcclBackend, in the GPU backend), Gloo between nodes (gloo_group.hpp, in
// liblevers_gloo), shared memory within each node and Gloo between their
// leaders (HierarchicalBackend), or host buffers staged through a GPU group
// (GpuStagedBackend). The training loop, gradient averaging and the rank
// helpers see only this interface.
//
// Every collective is collective: every rank calls the same ones in the same
// order. Buffers live where the backend computes (host memory for the
// shared-memory backend, the GPU's memory for NCCL).
#pragma once

#include "levers/core/dtype.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace levers::dist {

class CollectiveQueue;
class Store;

enum class ReduceOp { sum, mean };

class Backend {
public:
    virtual ~Backend() = default;

    virtual int rank() const = 0;
    virtual int world_size() const = 0;
    virtual std::string name() const = 0;  // for messages: "shared memory", "NCCL"

    virtual void barrier() = 0;
    // In place, n elements of `dtype` (f32 or f64).
    virtual void all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) = 0;
    // `bytes` from root's `data` into everyone's.
    virtual void broadcast(void* data, std::size_t bytes, int root) = 0;
    // out[world * n] = every rank's in[n], in rank order.
    virtual void all_gather(void* out, const void* in, std::int64_t n, DType dtype) = 0;
    // Reduces in[n] across ranks; this rank receives chunk(n, world, rank) of it in `out`.
    // `out` may lie inside `in` (ZeRO reduces a bucket into its own chunk).
    virtual void reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) = 0;
    // data[world * n]: every rank's n elements at data + rank * n, sent to
    // every rank in place. The default stages this rank's part in host
    // memory (Gloo's input may not alias its output); groups that gather in
    // place override it.
    virtual void all_gather_in_place(void* data, std::int64_t n, DType dtype);
    // Fails every rank's current and later collectives, naming this rank and `why`.
    virtual void abort(const std::string& why) = 0;

    // The group's key-value store, where it has one of its own (shared
    // memory: ranks pass the NCCL id through it); null otherwise.
    virtual Store* store() { return nullptr; }

    // A queue for collectives that run while the caller goes on
    // (collective_queue.hpp). A group on GPU memory (queues_on_gpu: NCCL)
    // runs them on its own stream, each after the work queued so far on
    // stream `after` (a cudaStream_t); others on a communication thread of
    // the queue's own (`after` must be null). The queue must not outlive the group.
    virtual bool queues_on_gpu() const { return false; }
    virtual std::unique_ptr<CollectiveQueue> make_queue(void* after);

    // Seconds this rank spent inside collectives, and the part of it spent
    // waiting for other ranks (the rest moved data).
    struct Timing {
        double in_collectives = 0, waiting = 0;
    };
    virtual Timing timing() const = 0;

    template <class T> void all_reduce(T* data, std::int64_t n, ReduceOp op) {
        all_reduce(static_cast<void*>(data), n, dtype_of<T>(), op);
    }
    template <class T> void all_gather(T* out, const T* in, std::int64_t n) {
        all_gather(static_cast<void*>(out), static_cast<const void*>(in), n, dtype_of<T>());
    }
    template <class T> void reduce_scatter(T* out, const T* in, std::int64_t n, ReduceOp op) {
        reduce_scatter(static_cast<void*>(out), static_cast<const void*>(in), n, dtype_of<T>(), op);
    }

    // The [begin, end) of n elements that `rank` owns: world nearly equal parts.
    static std::pair<std::int64_t, std::int64_t> chunk(std::int64_t n, int world, int rank);

protected:
    // Turns a sum over `world` ranks into their mean, as the shared-memory
    // group does: floats times 1/world, integers divided. Host memory.
    static void sum_to_mean(void* data, std::int64_t n, DType dtype, int world);
    // reduce_scatter as an all_reduce of all n elements in `scratch`, this
    // rank's chunk copied out: for groups whose own scatter cannot give
    // levers' chunks (they may differ by one element). Host memory.
    void reduce_scatter_by_all_reduce(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op,
                                      std::vector<char>& scratch);
};

}  // namespace levers::dist
