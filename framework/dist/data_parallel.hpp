// dist::wrap(model): data parallelism for a recipe that owns its loop.
//
//   auto ddp = dist::wrap(model);                 // parameters now rank 0's
//   for (...) {
//       model.params().zero_grad();
//       float loss = ddp.forward_backward(true, batch...);   // gradients averaged
//       optimizer.step(lr);
//   }
//
// Collective: every rank must wrap and call forward_backward the same way.
// In a world of one it only runs forward and backward.
#pragma once

#include "framework/dist/context.hpp"
#include "framework/dist/grad_sync.hpp"

#include <memory>
#include <utility>

namespace levers::dist {

template <class Model> class DataParallel {
public:
    explicit DataParallel(Model& model, std::int64_t bucket_bytes = std::int64_t{25} << 20) : model_(model) {
        auto& params = model_.params();
        if (ShmBackend* group = backend()) {
            group->broadcast(params.params().template data<float>(), static_cast<std::size_t>(params.size()) * 4, 0);
            sync_ = std::make_unique<GradientSync>(*group, params.grads().template data<float>(), params.size(),
                                                   std::max<std::int64_t>(1, bucket_bytes / 4));
        }
    }

    Model& module() { return model_; }

    // model.forward(args...) then model.backward(). With `sync` (the last
    // micro-batch of a step) the gradients are averaged over ranks, in buckets
    // overlapping backward, before it returns; without, they only accumulate.
    // Returns this rank's loss.
    template <class... Args> float forward_backward(bool sync, Args&&... args) {
        auto& params = model_.params();
        if (sync && sync_) params.set_grads_final_hook([this](std::int64_t from) { sync_->ready_from(from); });
        float loss = 0;
        try {
            loss = model_.forward(std::forward<Args>(args)...);
            model_.backward();
        } catch (...) {
            params.set_grads_final_hook({});
            throw;
        }
        params.set_grads_final_hook({});
        if (sync && sync_) sync_->finish();
        return loss;
    }

private:
    Model& model_;
    std::unique_ptr<GradientSync> sync_;
};

// Collective: wraps `model` for data-parallel training (see DataParallel).
template <class Model> DataParallel<Model> wrap(Model& model, std::int64_t bucket_bytes = std::int64_t{25} << 20) {
    return DataParallel<Model>(model, bucket_bytes);
}

}  // namespace levers::dist
