#include "levers/distributed/data_parallel.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/zero.hpp"

#include <algorithm>

namespace levers::dist {

namespace {
// The group that carries collectives on the parameters' memory.
Backend* group_for(const ParamSet& params) {
    if (params.device().is_cpu()) return backend();
    Backend* group = device_backend();
    LEVERS_CHECK(group, "parameters on {} but this job has no group for GPU memory (NCCL)", params.device().str());
    return group;
}
}  // namespace

ParamSync::ParamSync(ParamSet& params, std::int64_t bucket_bytes, int zero, Backend* group)
    : params_(params), zero_(zero), shard_(FlatShard::whole(params.size())) {
    check_zero_stage(zero);
    const bool alone = !group && !backend();
    if (alone) zero_ = 0;  // a world of one: nothing to shard
    if (zero_ != 2) params.unshard_grads();  // a set an earlier ZeRO-2 loop left sharded
    if (alone) return;
    group_ = group ? group : group_for(params);
    group = group_;
    group->broadcast(params.params().raw(), params.params().bytes(), 0);
    params.changed();
    const auto elem = static_cast<std::int64_t>(size_of(params.grad_dtype()));
    bucket_elems_ = std::max<std::int64_t>(1, bucket_bytes / elem);
    if (zero_ > 0) {
        bucket_elems_ = shard_bucket_elems(bucket_elems_, group->world_size());
        shard_ = bucket_shard(params.size(), bucket_elems_, group->world_size(), group->rank());
    }
    // Where the set computes from a copy in another dtype (bf16 on a GPU), ZeRO keeps the master values of the
    // shard only: the optimizer updates nothing else, and the copy is what every rank gathers.
    if (zero_ > 0 && params.compute_dtype() != params.dtype()) params.shard_params(shard_);
    void* stream = group->queues_on_gpu() ? compute_stream() : nullptr;
    if (zero_ == 2) {
        params.shard_grads(shard_);  // the whole gradient buffer goes: buckets hold a backward's gradients
        sync_ = std::make_unique<GradientSync>(*group, params, bucket_elems_, stream);
    } else {
        sync_ = std::make_unique<GradientSync>(*group, params.grads().raw(), params.grad_dtype(), params.size(),
                                               bucket_elems_, stream);
    }
    frontier_ = std::make_unique<FinalFrontier>(params, [this](std::int64_t from) { sync_->ready_from(from); },
                                                zero_ == 2 ? sync_.get() : nullptr);
}

void ParamSync::disarm() {
    if (params_.grad_hooks() == frontier_.get()) params_.set_grad_hooks(nullptr);
}

ParamSync::~ParamSync() {
    disarm();
    params_.set_arrivals(nullptr);  // a loop that failed: what is queued dies with the queue
}

void ParamSync::arm() {
    if (sync_) params_.set_grad_hooks(frontier_.get());
}

void ParamSync::finish() {
    disarm();
    if (sync_) sync_->finish();
}

void ParamSync::gather_params() {
    if (zero_ == 0) return;
    // The values gathered: the master values, or where the set keeps a shard of them its compute copy, into
    // whose chunks this rank's updated masters are converted first (half the bytes in bf16).
    const Tensor* flat = &params_.params();
    if (params_.sharded_params()) {
        flat = &params_.compute();
        shard_to_whole(shard_, params_.params(), *flat);
        params_.compute_written();
    } else {
        params_.changed();
    }
    // Queued behind the update, the buffer's start first: the next forward waits for each bucket as it reaches
    // it (ParamSet::ready), and backward's collectives queue behind these.
    arriving_ = queue_gather_buckets(*group_, sync_->queue(), *flat, bucket_elems_);
    next_arriving_ = 0;
    params_.set_arrivals(this);
}

bool ParamSync::await(std::int64_t end) {
    std::size_t k = next_arriving_;
    while (k < arriving_.size() && arriving_[k].begin < end) ++k;
    if (k > next_arriving_) {
        sync_->queue().wait(arriving_[k - 1].work);  // and those queued before it
        next_arriving_ = k;
    }
    return next_arriving_ == arriving_.size();
}

void ParamSync::end() {
    disarm();
    params_.await(params_.size());
    if (!params_.sharded_params()) {
        params_.unshard_grads();
        return;
    }
    params_.release_grads();  // their memory goes before the whole master values come

    Tensor whole = Tensor::persistent({params_.size()}, params_.dtype(), params_.device());
    shard_to_whole(shard_, params_.params(), whole);
    gather_buckets(*group_, whole, bucket_elems_);  // every element outside the shard is written by its owner
    params_.unshard_params(whole);
}

}  // namespace levers::dist
