#include "framework/dist/data_parallel.hpp"

#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "framework/dist/context.hpp"

#include <algorithm>

namespace levers::dist {

ParamSync::ParamSync(ParamSet& params, std::int64_t bucket_bytes) : params_(params) {
    if (!backend()) return;  // a world of one
    const bool on_card = !params.device().is_cpu();
    Backend* group = on_card ? device_backend() : backend();
    LEVERS_CHECK(group, "parameters on {} but this job has no group for card memory (NCCL)", params.device().str());
    group->broadcast(params.params().raw(), params.params().bytes(), 0);
    params.changed();
    const auto elem = static_cast<std::int64_t>(size_of(params.grad_dtype()));
    sync_ = std::make_unique<GradientSync>(*group, params.grads().raw(), params.grad_dtype(), params.size(),
                                           std::max<std::int64_t>(1, bucket_bytes / elem),
                                           on_card ? compute_stream() : nullptr);
    frontier_ = std::make_unique<FinalFrontier>(params, [this](std::int64_t from) { sync_->ready_from(from); });
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

}  // namespace levers::dist
