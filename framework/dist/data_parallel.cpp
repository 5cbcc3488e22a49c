#include "framework/dist/data_parallel.hpp"

#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "framework/dist/context.hpp"
#include "framework/dist/zero.hpp"

#include <algorithm>

namespace levers::dist {

namespace {
// The group that carries collectives on the parameters' memory.
Backend* group_for(const ParamSet& params) {
    if (params.device().is_cpu()) return backend();
    Backend* group = device_backend();
    LEVERS_CHECK(group, "parameters on {} but this job has no group for card memory (NCCL)", params.device().str());
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
    void* stream = group->queues_on_card() ? compute_stream() : nullptr;
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

ParamSync::~ParamSync() { disarm(); }

void ParamSync::disarm() {
    if (params_.grad_hooks() == frontier_.get()) params_.set_grad_hooks(nullptr);
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
    gather_buckets(*group_, params_.params(), bucket_elems_);
    params_.changed();
}

}  // namespace levers::dist
