// Data-parallel gradient averaging that overlaps backward (DDP's buckets).
//
// The flat gradient buffer is cut into buckets of `bucket_elems` from its end
// (models lay parameters out in forward order, so backward finishes the end of
// the buffer first). As backward reports that everything from some offset on
// is final, each bucket lying wholly inside that range is queued for
// averaging over ranks in place (collective_queue.hpp: on the CPU a
// communication thread, on GPUs the backend's stream behind the compute
// stream's work) while backward goes on; finish() queues the rest and waits.
// Every rank reports the same offsets in the same order, so the collectives
// match. The offsets come from the autograd engine through FinalFrontier, the
// listener data parallelism sets on the model's ParamSet.
//
// Under ZeRO-2 the set keeps only this rank's shard of the gradients
// (ParamSet::shard_grads) and no whole buffer exists: each bucket's gradients
// live in memory of its own from backward's first write into it (parameters
// wholly inside a bucket accumulate straight into it; one that straddles two
// is copied in when final) until its reduce-scatter is done and this rank's
// chunk has been added into the shard. At most kInFlight buckets wait for
// their collective at once, so the gradients a rank holds during backward are
// its shard and a few buckets, not the whole (DeepSpeed's stage 2).
#pragma once

#include "levers/core/params.hpp"
#include "levers/distributed/backend.hpp"
#include "levers/distributed/collective_queue.hpp"

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

namespace levers::dist {

// Turns the autograd engine's per-parameter calls (GradHooks) into DDP's
// frontier: `ready(offset)` each time every gradient from `offset` to the end
// of the flat buffer has become final in this backward pass. Parameters the
// pass does not use are final from its start.
class GradientSync;

class FinalFrontier final : public GradHooks {
public:
    // `sharded`: the buckets that hold the gradients while the set keeps a shard (ZeRO-2), else null.
    FinalFrontier(const ParamSet& params, std::function<void(std::int64_t offset)> ready,
                  GradientSync* sharded = nullptr);
    void backward_begins() override;
    void will_compute(int entry) override;
    void planned() override;
    void grad_final(int entry, Tensor& grad) override;
    Tensor grad_storage(int entry) override;

private:
    void advance();
    const ParamSet& params_;
    std::function<void(std::int64_t)> ready_;
    GradientSync* sharded_;
    std::vector<char> final_;   // per entry, during a backward pass
    std::size_t frontier_ = 0;  // entries [frontier_, n) are final and announced
};

class GradientSync {
public:
    // Each bucket of `grads` averaged on every rank (DDP, ZeRO-1). `grads`: n
    // elements of `dtype` (bf16 only on a GPU). `gpu_stream`: the stream
    // backward's kernels run on (GPUs only).
    GradientSync(Backend& group, void* grads, DType dtype, std::int64_t n, std::int64_t bucket_elems,
                 void* gpu_stream = nullptr);
    // ZeRO-2: `params` keep their shard of gradients only (ParamSet::shard_grads
    // with bucket_shard's ranges for these buckets); each backward's gradients
    // are averaged into it, adding to what earlier micro-batches left there.
    GradientSync(Backend& group, ParamSet& params, std::int64_t bucket_elems, void* gpu_stream = nullptr);
    GradientSync(const GradientSync&) = delete;
    GradientSync& operator=(const GradientSync&) = delete;
    ~GradientSync();

    // Buckets waiting for their reduce-scatter at once, at most (ZeRO-2): one
    // reduced while backward fills the next.
    static constexpr std::size_t kInFlight = 1;
    // ZeRO-2, for the autograd engine (GradHooks): where an entry's gradient
    // accumulates (a view of its bucket, made zeroed on first use; undefined
    // for an entry that straddles two buckets), and an entry's final gradient
    // copied into its buckets where it is not in one already (`grad` is let go).
    Tensor storage(int entry);
    void take(int entry, Tensor& grad);

    // Gradients in [from, n) will not change again in this step. Called from
    // one thread (backward's).
    void ready_from(std::int64_t from);
    // Averages whatever is left and returns when every bucket is done (rethrows
    // a communication failure). Then the next step's ready_from calls may begin.
    void finish();

    // The queue its collectives run on, for others of the same group to run
    // in order with them (ZeRO's gathered parameters).
    CollectiveQueue& queue() { return *queue_; }

    // Seconds finish() waited for communication (what overlap did not hide),
    // and seconds the communication thread spent in collectives, both so far.
    double exposed_seconds() const { return exposed_; }
    double busy_seconds() const { return queue_->busy().in_collectives; }
    // Of busy_seconds, the part spent waiting at barriers for other ranks.
    double busy_waiting_seconds() const { return queue_->busy().waiting; }

private:
    // A bucket of the sharded gradients: [begin, end) of the flat buffer, this
    // rank's chunk [lo, hi) of it, that chunk's place in the shard, and its
    // memory while it has some.
    struct Bucket {
        std::int64_t begin = 0, end = 0, lo = 0, hi = 0, at = 0;
        Tensor memory;
        Work work;
    };
    void queue_until(std::int64_t from);
    void* at(std::int64_t i) const { return grads_ + i * static_cast<std::int64_t>(size_of(dtype_)); }
    std::size_t bucket_of(std::int64_t element) const;  // index into buckets_
    Tensor& memory_of(Bucket& b);
    void drain_oldest();  // waits for the oldest bucket in flight and adds its chunk into the shard

    std::unique_ptr<CollectiveQueue> queue_;
    ParamSet* sharded_ = nullptr;  // ZeRO-2's set, else null
    std::vector<Bucket> buckets_;   // ZeRO-2: in the order queued (from the end of the buffer)
    std::size_t next_bucket_ = 0;   // ZeRO-2: buckets_[next_bucket_..] are not queued yet
    std::deque<std::size_t> in_flight_;
    std::byte* grads_;
    DType dtype_;
    std::int64_t n_, bucket_;
    std::int64_t next_end_;  // buckets [.., next_end_) are not queued yet
    Work last_;              // the last bucket queued
    double exposed_ = 0;
};

}  // namespace levers::dist
