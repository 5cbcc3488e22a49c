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

#include "levers/distributed/backend.hpp"
#include "levers/distributed/shm_store.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace levers::dist {

class ShmBackend final : public Backend {
public:
    static constexpr int kMaxRanks = 64;

    // Bytes a segment needs for `world` ranks with slots of `slot_bytes`.
    static std::size_t segment_bytes(int world, std::size_t slot_bytes);
    // Lays out a fresh zero-filled segment; the creator calls it once, before
    // any rank constructs a backend on it.
    static void initialize(void* memory, std::size_t bytes, int world, std::size_t slot_bytes);

    struct Options {
        // A rank that waits checks, ten times a second, that the ranks it
        // waits for are still running, and fails the group at once naming one
        // that exited: for launchers that do not watch their ranks (levers'
        // own does).
        bool watch_peers = false;
        // The job's rank of this group's rank 0, for messages: a node's group
        // in a job across nodes names the job's ranks.
        int first_rank = 0;
    };

    // Joins the group laid out in `memory` as `rank`. `timeout` bounds every wait.
    ShmBackend(void* memory, std::size_t bytes, int rank, std::chrono::milliseconds timeout);
    ShmBackend(void* memory, std::size_t bytes, int rank, std::chrono::milliseconds timeout, Options options);

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    std::string name() const override { return "shared memory"; }

    using Backend::all_gather;
    using Backend::all_reduce;
    using Backend::reduce_scatter;
    void barrier() override;
    void all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override;
    void broadcast(void* data, std::size_t bytes, int root) override;
    void all_gather(void* out, const void* in, std::int64_t n, DType dtype) override;
    void reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) override;
    void all_gather_in_place(void* data, std::int64_t n, DType dtype) override;

    // Fails every rank's current and later collectives, naming this rank and `why`.
    void abort(const std::string& why) override;
    // The same from outside the group (the launcher), on a laid-out segment.
    static void abort_group(void* memory, const std::string& why);
    // Why the group laid out in `memory` was aborted, for the launcher's verdict.
    struct AbortState {
        int by = -1;  // the rank that aborted it; -1: not aborted, or by the launcher
        std::string reason;
        std::vector<int> stalled;  // the ranks a timed-out rank waited for
    };
    static AbortState abort_state(const void* memory);
    // The group's key-value store (not collective: any rank, any time).
    ShmStore* store() override { return &store_; }


    Timing timing() const override { return timing_; }

    struct Layout;  // in shm_layout.hpp

private:
    enum class Op : std::uint32_t { barrier = 1, all_reduce, broadcast, all_gather, reduce_scatter };

    template <class T> void all_reduce_typed(T* data, std::int64_t n, ReduceOp op);
    template <class T> void all_gather_typed(T* out, const T* in, std::int64_t n);
    template <class T> void reduce_scatter_typed(T* out, const T* in, std::int64_t n, ReduceOp op);
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
    bool watch_peers_ = false;
    int first_rank_ = 0;
    Timing timing_;
    ShmStore store_;
};

}  // namespace levers::dist
