// Data parallelism: the same model on every rank, gradients averaged.
//
// ParamSync does it for a ParamSet (the training loop uses it); dist::wrap
// does it for a model, for recipes that own their loop:
//
//   auto ddp = dist::wrap(model);                 // parameters now rank 0's
//   for (...) {
//       model.params().zero_grad();
//       double loss = ddp.step(true, [&] {            // gradients averaged
//           Tensor l = model.loss(x, y);
//           l.backward();
//           return l.item();
//       });
//       optimizer.step(lr);
//   }
//
// Collective: every rank must construct them and call them the same way. In a
// world of one they only run forward and backward.
//
// ParamSync also runs ZeRO stages 1 and 2 (zero.hpp) for the training loop:
// each rank's optimizer updates its shard() only (the loop takes the
// gradients' norm over the shards: levers/train/param_kernels.hpp), and
// gather_params() sends every shard to all. Where the model computes from a
// copy in another dtype (bf16 on a GPU), the set keeps the f32 master
// values of its shard only (ParamSet::shard_params) until end(), and the
// compute copy is what is gathered.
#pragma once

#include "levers/core/flat_shard.hpp"
#include "levers/core/params.hpp"
#include "levers/distributed/grad_sync.hpp"
#include "levers/distributed/zero.hpp"

#include <memory>
#include <utility>

namespace levers::dist {

class ParamSync final : public ParamArrivals {
public:
    static constexpr std::int64_t kDefaultBucketBytes = std::int64_t{25} << 20;  // DDP's

    // Collective: every rank starts from rank 0's parameters. `zero`: 0 (DDP:
    // every rank averages and updates everything), 1 (each rank updates its
    // shard of the averaged gradients, keeping the master values of its shard
    // only where the set has a compute copy), 2 (the set keeps its shard of the
    // gradients only, ParamSet::shard_grads: each bucket is reduce-scattered
    // into it as backward finishes it, on every micro-batch).
    // `group`: the one to average over, where not the job's (the memory plan's traced group).
    explicit ParamSync(ParamSet& params, std::int64_t bucket_bytes = kDefaultBucketBytes, int zero = 0,
                       Backend* group = nullptr);
    ~ParamSync() override;

    // Before the backward pass whose gradients are to be averaged (a step's
    // last micro-batch; every micro-batch under ZeRO-2, whose gradients have
    // nowhere else to go): buckets start as backward finishes them.
    void arm();
    bool averages_every_micro_batch() const { return zero_ == 2; }
    // After that backward: returns when every bucket is averaged.
    void finish();
    // The bucket machinery, or null in a world of one (for its timings).
    const GradientSync* buckets() const { return sync_.get(); }

    // The part of the flat buffers this rank's optimizer updates: the whole
    // without ZeRO (or in a world of one).
    const FlatShard& shard() const { return shard_; }
    int zero() const { return zero_; }
    // Collective under ZeRO, after the optimizer updated this rank's shard:
    // every rank's shard of the parameters sent to every rank (where the set
    // keeps its master values sharded, its compute copy). Nothing without.
    // Queued: it returns at once, and the set's values arrive bucket by
    // bucket while the next forward starts (ParamSet::set_arrivals).
    void gather_params();
    bool await(std::int64_t end) override;  // ParamArrivals: the set asks
    // Collective, once the loop is done (not when it failed: the destructor
    // leaves the set as it is): the set's master values whole again on every
    // rank, its gradients too (where the masters were sharded, their memory
    // goes first; they are made zeroed at their next use). Nothing after it.
    void end();

private:
    void disarm();
    ParamSet& params_;
    Backend* group_ = nullptr;  // null in a world of one
    int zero_ = 0;
    std::int64_t bucket_elems_ = 0;
    FlatShard shard_;
    std::unique_ptr<GradientSync> sync_;
    std::unique_ptr<FinalFrontier> frontier_;  // what the autograd engine calls during backward
    std::vector<QueuedBucket> arriving_;  // the last gather's buckets, in forward order
    std::size_t next_arriving_ = 0;       // arriving_[..next_arriving_) have arrived
};

template <class Model> class DataParallel {
public:
    explicit DataParallel(Model& model, std::int64_t bucket_bytes = ParamSync::kDefaultBucketBytes)
        : model_(model), sync_(std::make_unique<ParamSync>(model.params(), bucket_bytes)) {}

    Model& module() { return model_; }

    // Runs `forward_backward()` (one micro-batch's forward and backward: it
    // returns whatever it likes, the loss). With `sync` (the last micro-batch
    // of a step) the gradients are averaged over ranks, in buckets
    // overlapping backward, before this returns; without, they only accumulate.
    template <class F> auto step(bool sync, F&& forward_backward) {
        if (sync) sync_->arm();
        auto out = forward_backward();
        if (sync) sync_->finish();
        return out;
    }

private:
    Model& model_;
    std::unique_ptr<ParamSync> sync_;
};

// Collective: wraps `model` for data-parallel training (see DataParallel).
template <class Model>
DataParallel<Model> wrap(Model& model, std::int64_t bucket_bytes = ParamSync::kDefaultBucketBytes) {
    return DataParallel<Model>(model, bucket_bytes);
}

}  // namespace levers::dist
