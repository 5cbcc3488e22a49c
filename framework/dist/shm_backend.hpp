// Collectives for CPU tensors between the processes of one node, through a
// shared-memory segment.
//
// Every rank has a slot of `slot_bytes` in the segment. Large tensors go in
// pieces of one slot. An all-reduce piece: each rank copies its piece into its
// slot; after a barrier each rank reduces its own 1/world of the piece across
// every slot into its own slot (so all ranks reduce in parallel, and each
// element is reduced once, by one rank, giving bitwise-identical results
// everywhere); after a second barrier each rank copies the reduced chunks out.
//
// Synchronisation is a generation-counting barrier on futexes: no mutex a dead
// rank could hold. Every wait has a deadline; a timeout or abort() on any rank
// fails every rank's pending and future collectives with a message naming the
// ranks that did not arrive. Every collective is collective: every rank must
// call the same ones in the same order (a mismatch is detected and reported).
#pragma once

#include "framework/dist/shm_store.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

namespace levers::dist {

enum class ReduceOp { sum, mean };

class ShmBackend {
public:
    static constexpr int kMaxRanks = 64;

    // Bytes a segment needs for `world` ranks with slots of `slot_bytes`.
    static std::size_t segment_bytes(int world, std::size_t slot_bytes);
    // Lays out a fresh zero-filled segment; the creator calls it once, before
    // any rank constructs a backend on it.
    static void initialize(void* memory, std::size_t bytes, int world, std::size_t slot_bytes);

    // Joins the group laid out in `memory` as `rank`. `timeout` bounds every wait.
    ShmBackend(void* memory, std::size_t bytes, int rank, std::chrono::milliseconds timeout);

    int rank() const { return rank_; }
    int world_size() const { return world_; }

    void barrier();
    // In place; f32 and f64.
    template <class T> void all_reduce(T* data, std::int64_t n, ReduceOp op);
    // `bytes` from root's `data` into everyone's.
    void broadcast(void* data, std::size_t bytes, int root);
    // out[world * n] = every rank's in[n], in rank order.
    template <class T> void all_gather(T* out, const T* in, std::int64_t n);
    // Reduces in[n] across ranks; this rank receives chunk(n, world, rank) of it in `out`.
    template <class T> void reduce_scatter(T* out, const T* in, std::int64_t n, ReduceOp op);

    // The [begin, end) of n elements that `rank` owns: world nearly equal parts.
    static std::pair<std::int64_t, std::int64_t> chunk(std::int64_t n, int world, int rank);

    // Fails every rank's current and later collectives, naming this rank and `why`.
    void abort(const std::string& why);
    // The same from outside the group (the launcher), on a laid-out segment.
    static void abort_group(void* memory, const std::string& why);
    // The group's key-value store (not collective: any rank, any time).
    ShmStore store() const { return ShmStore(layout_, timeout_); }


    // Seconds this rank spent inside collectives, and the part of it spent
    // waiting at their barriers for other ranks (the rest moved data).
    struct Timing {
        double in_collectives = 0, waiting = 0;
    };
    Timing timing() const { return timing_; }

    struct Layout;  // in shm_layout.hpp

private:
    enum class Op : std::uint32_t { barrier = 1, all_reduce, broadcast, all_gather, reduce_scatter };

    void record(Op op, std::uint64_t count);  // publishes (op, count) as this rank's next collective
    void enter(Op op, std::uint64_t count);   // records, then checks the others match
    void wait_all(Op op);                    // the barrier inside every collective, timed
    void wait_all_untimed(Op op);
    void check_matching(Op op, std::uint64_t count);
    [[noreturn]] void fail_aborted();
    std::byte* slot(int r) const;

    Layout* layout_;
    std::byte* slots_;
    std::size_t slot_bytes_;
    int rank_, world_;
    std::chrono::milliseconds timeout_;
    Timing timing_;
};

}  // namespace levers::dist
