#include "levers/distributed/nccl_backend.hpp"
#include "levers/distributed/nccl_group.hpp"

#include "levers/kernels/cuda/cuda_check.hpp"
#include "levers/core/environment.hpp"
#include "levers/core/clock.hpp"
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/distributed/gpu_quirks.hpp"
#include "levers/distributed/collective_queue.hpp"

#include <nccl.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>
#include <vector>

namespace levers::dist {

namespace {

void nccl_check(ncclResult_t r, const char* call, int rank) {
    LEVERS_CHECK(r == ncclSuccess || r == ncclInProgress, "rank {}: {} failed: {}", rank, call, ncclGetErrorString(r));
}
#define LEVERS_NCCL_CHECK(call) nccl_check((call), #call, rank_)
// For the collectives: see NcclBackend::enqueued.
#define LEVERS_NCCL_ENQUEUE(call) enqueued(static_cast<int>(call), #call)

ncclDataType_t nccl_type(DType t) {
    switch (t) {
        case DType::f32: return ncclFloat32;
        case DType::f64: return ncclFloat64;
        case DType::bf16: return ncclBfloat16;
        case DType::i32: return ncclInt32;
    }
    LEVERS_FAIL("NCCL cannot carry dtype {}", name_of(t));
}

std::size_t width(DType t) { return size_of(t); }

}  // namespace

struct NcclBackend::State {
    ncclComm_t comm = nullptr;
    cudaStream_t stream = nullptr;
    cudaEvent_t ready = nullptr;  // re-recorded for each queued collective
    bool aborted = false;
};

NcclBackend::NcclBackend(int rank, int world, int device, Store& store, std::chrono::milliseconds timeout)
    : state_(std::make_unique<State>()), rank_(rank), world_(world), timeout_(timeout) {
    use_gpu(device);
    int version = 0;
    LEVERS_NCCL_CHECK(ncclGetVersion(&version));
    apply_quirks(plan_quirks(gpu_names(), version, [](const char* v) { return env::get_even_empty(v); }));
    const auto id_bytes = share_id(
        rank, store, "levers/nccl_id",
        [] {
            ncclUniqueId id;
            nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId", 0);
            return std::vector<unsigned char>(reinterpret_cast<unsigned char*>(&id),
                                              reinterpret_cast<unsigned char*>(&id) + sizeof(id));
        },
        sizeof(ncclUniqueId));
    ncclUniqueId id;
    std::memcpy(&id, id_bytes.data(), sizeof(id));
    LEVERS_CUDA_CHECK(cudaStreamCreateWithFlags(&state_->stream, cudaStreamNonBlocking));
    LEVERS_CUDA_CHECK(cudaEventCreateWithFlags(&state_->ready, cudaEventDisableTiming));
    // Non-blocking communicator: initialisation and collectives can be waited
    // on with a deadline and aborted.
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    LEVERS_NCCL_CHECK(ncclCommInitRankConfig(&state_->comm, world, id, rank, &config));
    poll(fmt::format("joining the NCCL communicator of {} ranks", world),
         [](bool in_progress) { return !in_progress; });
}

NcclBackend::~NcclBackend() {
    if (state_->comm) state_->aborted ? ncclCommAbort(state_->comm) : ncclCommDestroy(state_->comm);
    if (state_->ready) cudaEventDestroy(state_->ready);
    if (state_->stream) cudaStreamDestroy(state_->stream);
}

double NcclBackend::poll(std::string_view what, const std::function<bool(bool in_progress)>& done) {
    const auto start = Clock::now();
    for (;;) {
        ncclResult_t async = ncclSuccess;
        LEVERS_NCCL_CHECK(ncclCommGetAsyncError(state_->comm, &async));
        if (async != ncclSuccess && async != ncclInProgress) {
            abort(std::string(what));
            LEVERS_FAIL("rank {}: {} failed: {}", rank_, what, ncclGetErrorString(async));
        }
        if (done(async == ncclInProgress)) return seconds_since(start);
        if (Clock::now() - start > timeout_) {
            abort(std::string(what));
            LEVERS_FAIL("rank {}: {} did not finish within {} ms (a rank is missing or stuck); the communicator was "
                        "aborted", rank_, what, timeout_.count());
        }
        std::this_thread::yield();
    }
}

void NcclBackend::wait(const char* what) {
    timing_.in_collectives += poll(what, [&](bool) {
        const cudaError_t stream = cudaStreamQuery(state_->stream);
        LEVERS_CHECK(stream == cudaSuccess || stream == cudaErrorNotReady, "rank {}: {} failed on the GPU: {}", rank_,
                     what, cudaGetErrorString(stream));
        return stream == cudaSuccess;
    });
}

void NcclBackend::enqueued(int result, const char* call) {
    const auto r = static_cast<ncclResult_t>(result);
    nccl_check(r, call, rank_);
    if (r == ncclInProgress) poll(call, [](bool in_progress) { return !in_progress; });
}

void NcclBackend::barrier() {
    float* one = nullptr;
    LEVERS_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&one), sizeof(float), state_->stream));
    LEVERS_CUDA_CHECK(cudaMemsetAsync(one, 0, sizeof(float), state_->stream));
    LEVERS_NCCL_ENQUEUE(ncclAllReduce(one, one, 1, ncclFloat32, ncclSum, state_->comm, state_->stream));
    LEVERS_CUDA_CHECK(cudaFreeAsync(one, state_->stream));
    wait("NCCL barrier");
}

void NcclBackend::all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) {
    LEVERS_NCCL_ENQUEUE(ncclAllReduce(data, data, static_cast<std::size_t>(n), nccl_type(dtype),
                                    op == ReduceOp::mean ? ncclAvg : ncclSum, state_->comm, state_->stream));
    wait("NCCL all_reduce");
}

void NcclBackend::broadcast(void* data, std::size_t bytes, int root) {
    LEVERS_NCCL_ENQUEUE(ncclBroadcast(data, data, bytes, ncclUint8, root, state_->comm, state_->stream));
    wait("NCCL broadcast");
}

void NcclBackend::all_gather(void* out, const void* in, std::int64_t n, DType dtype) {
    LEVERS_NCCL_ENQUEUE(ncclAllGather(in, out, static_cast<std::size_t>(n), nccl_type(dtype), state_->comm,
                                    state_->stream));
    wait("NCCL all_gather");
}

// NCCL gathers in place when the input is this rank's part of the output.
void NcclBackend::all_gather_in_place(void* data, std::int64_t n, DType dtype) {
    const std::size_t offset = static_cast<std::size_t>(rank_) * static_cast<std::size_t>(n) * width(dtype);
    all_gather(data, static_cast<const char*>(data) + offset, n, dtype);
}

void NcclBackend::reduce_scatter(void* out, const void* in, std::int64_t n, DType dtype, ReduceOp op) {
    // NCCL scatters equal parts; levers' chunks may differ by one element, so
    // reduce everything into scratch and keep this rank's chunk.
    const auto [lo, hi] = chunk(n, world_, rank_);
    void* scratch = nullptr;
    const std::size_t w = width(dtype);
    LEVERS_CUDA_CHECK(cudaMallocAsync(&scratch, static_cast<std::size_t>(n) * w, state_->stream));
    LEVERS_NCCL_ENQUEUE(ncclAllReduce(in, scratch, static_cast<std::size_t>(n), nccl_type(dtype),
                                    op == ReduceOp::mean ? ncclAvg : ncclSum, state_->comm, state_->stream));
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(out, static_cast<char*>(scratch) + static_cast<std::size_t>(lo) * w,
                                      static_cast<std::size_t>(hi - lo) * w, cudaMemcpyDeviceToDevice, state_->stream));
    LEVERS_CUDA_CHECK(cudaFreeAsync(scratch, state_->stream));
    wait("NCCL reduce_scatter");
}

class NcclBackend::StreamQueue final : public CollectiveQueue {
public:
    StreamQueue(NcclBackend& group, cudaStream_t after) : group_(group), after_(after) {}

    ~StreamQueue() override {
        for (const auto& [ticket, e] : pending_) cudaEventDestroy(e);
        for (cudaEvent_t e : spare_) cudaEventDestroy(e);
    }

    Work all_reduce(void* data, std::int64_t n, DType dtype, ReduceOp op) override {
        State& st = *group_.state_;
        after_compute();
        group_.enqueued(static_cast<int>(ncclAllReduce(data, data, static_cast<std::size_t>(n), nccl_type(dtype),
                                                       op == ReduceOp::mean ? ncclAvg : ncclSum, st.comm, st.stream)),
                        "ncclAllReduce (queued)");
        return queued();
    }

    // NCCL scatters equal parts, levers' chunks may differ by one: the whole
    // bucket is averaged, this rank's chunk among it.
    Work reduce_scatter(void* data, std::int64_t n, DType dtype, ReduceOp op) override {
        return all_reduce(data, n, dtype, op);
    }

    Work all_gather(void* data, std::int64_t n, DType dtype) override {
        State& st = *group_.state_;
        after_compute();
        const std::size_t part = static_cast<std::size_t>(n) * width(dtype);
        const void* mine = static_cast<const char*>(data) + static_cast<std::size_t>(group_.rank_) * part;
        group_.enqueued(static_cast<int>(ncclAllGather(mine, data, static_cast<std::size_t>(n), nccl_type(dtype),
                                                       st.comm, st.stream)),
                        "ncclAllGather (queued)");
        return queued();
    }

    // Waits for the event recorded after `w` (the stream runs them in order:
    // those queued before it are done too), within the group's timeout.
    void wait(Work w) override {
        if (w.ticket <= done_) return;
        while (!pending_.empty() && pending_.front().first <= w.ticket) {
            cudaEvent_t e = pending_.front().second;
            if (pending_.front().first == w.ticket)
                group_.timing_.in_collectives += group_.poll("NCCL queued collectives", [&](bool) {
                    const cudaError_t r = cudaEventQuery(e);
                    LEVERS_CHECK(r == cudaSuccess || r == cudaErrorNotReady, "rank {}: NCCL queued collectives "
                                 "failed on the GPU: {}", group_.rank_, cudaGetErrorString(r));
                    return r == cudaSuccess;
                });
            spare_.push_back(e);
            pending_.pop_front();
        }
        done_ = w.ticket;
    }

    Backend::Timing busy() const override { return {}; }

private:
    // The backend's stream waits for what `after` has queued so far (the
    // kernels that wrote these gradients or parameters), not for the host.
    void after_compute() {
        State& st = *group_.state_;
        LEVERS_CUDA_CHECK(cudaEventRecord(st.ready, after_));
        LEVERS_CUDA_CHECK(cudaStreamWaitEvent(st.stream, st.ready, 0));
    }

    // The ticket of the collective just queued, an event recorded behind it.
    Work queued() {
        cudaEvent_t e = nullptr;
        if (spare_.empty()) {
            LEVERS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        } else {
            e = spare_.back();
            spare_.pop_back();
        }
        LEVERS_CUDA_CHECK(cudaEventRecord(e, group_.state_->stream));
        pending_.emplace_back(++queued_, e);
        return {queued_};
    }

    NcclBackend& group_;
    cudaStream_t after_;
    std::uint64_t queued_ = 0, done_ = 0;
    std::deque<std::pair<std::uint64_t, cudaEvent_t>> pending_;  // tickets not waited for, their events
    std::vector<cudaEvent_t> spare_;
};

std::unique_ptr<CollectiveQueue> NcclBackend::make_queue(void* after) {
    LEVERS_CHECK(after, "rank {}: queued NCCL collectives need the stream they come after", rank_);
    return std::make_unique<StreamQueue>(*this, static_cast<cudaStream_t>(after));
}

void NcclBackend::abort(const std::string& why) {
    if (state_->comm && !state_->aborted) {
        state_->aborted = true;
        ncclCommAbort(state_->comm);
        state_->comm = nullptr;
    }
    (void)why;  // the caller reports it; NCCL's abort takes no reason
}

}  // namespace levers::dist

extern "C" levers::dist::Backend* levers_make_nccl_backend(int rank, int world, int device,
                                                          levers::dist::Store* store, long timeout_ms) {
    return new levers::dist::NcclBackend(rank, world, device, *store, std::chrono::milliseconds(timeout_ms));
}
