// Collectives between GPUs through NCCL, behind the same Backend interface as
// the shared-memory one. One communicator per job: rank 0's unique id reaches
// every rank through the job's Store (nccl_id.hpp). Buffers are device memory;
// every collective runs on the backend's own stream, and waits for it with the
// job's timeout, aborting the communicator (ncclCommAbort) if it expires, so a
// hung peer ends the job instead of hanging it. CUDA builds only.
#pragma once

#include "levers/distributed/backend.hpp"
#include "levers/distributed/nccl_id.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

namespace levers::dist {

class NcclBackend final : public Backend {
public:
    // Selects GPU `device` (before any other CUDA call), applies the GPU
    // quirks, and joins the communicator of `world` ranks.
    NcclBackend(int rank, int world, int device, Store& store, std::chrono::milliseconds timeout);
    ~NcclBackend() override;
    NcclBackend(const NcclBackend&) = delete;
    NcclBackend& operator=(const NcclBackend&) = delete;

    int rank() const override { return rank_; }
    int world_size() const override { return world_; }
    std::string name() const override { return "NCCL"; }

    using Backend::all_gather;
    using Backend::all_reduce;
    using Backend::reduce_scatter;
    void barrier() override;
    void all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override;
    void broadcast(void* data, std::size_t bytes, int root) override;
    void all_gather(void* out, const void* in, std::int64_t n, DType dtype) override;
    void reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) override;
    void all_gather_in_place(void* data, std::int64_t n, DType dtype) override;
    void abort(const std::string& why) override;
    bool queues_on_gpu() const override { return true; }
    // Queued all-reduces run on the backend's stream, each after what stream
    // `after` has queued so far; waiting for one waits for the stream.
    std::unique_ptr<CollectiveQueue> make_queue(void* after) override;
    Timing timing() const override { return timing_; }

private:
    struct State;
    class StreamQueue;
    // Polls until `done(in_progress)` says the work is over (in_progress: the
    // communicator is still busy), within the timeout: an error the
    // communicator reports, or the deadline, aborts it and fails naming
    // `what`. Returns the seconds it took.
    double poll(std::string_view what, const std::function<bool(bool in_progress)>& done);
    void wait(const char* what);  // for the stream, within the timeout; `what` names the collective
    // Checks a collective's call; where NCCL answered ncclInProgress (the
    // communicator is non-blocking), waits within the timeout until the
    // collective is on the stream, so that stream queries and events see it.
    void enqueued(int result, const char* call);
    std::unique_ptr<State> state_;
    int rank_, world_;
    std::chrono::milliseconds timeout_;
    Timing timing_;
};

}  // namespace levers::dist
