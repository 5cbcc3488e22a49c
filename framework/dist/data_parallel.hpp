// Data parallelism: the same model on every rank, gradients averaged.
//
// ParamSync does it for a ParamSet (the training loop uses it); dist::wrap
// does it for a model, for recipes that own their loop:
//
//   auto ddp = dist::wrap(model);                 // parameters now rank 0's
//   for (...) {
//       model.params().zero_grad();
//       float loss = ddp.forward_backward(true, batch...);   // gradients averaged
//       optimizer.step(lr);
//   }
//
// Collective: every rank must construct them and call them the same way. In a
// world of one they only run forward and backward.
#pragma once

#include "framework/core/params.hpp"
#include "framework/dist/grad_sync.hpp"

#include <memory>
#include <utility>

namespace levers::dist {

class ParamSync {
public:
    static constexpr std::int64_t kDefaultBucketBytes = std::int64_t{25} << 20;  // DDP's

    // Collective: every rank starts from rank 0's parameters.
    explicit ParamSync(ParamSet<float>& params, std::int64_t bucket_bytes = kDefaultBucketBytes);
    ~ParamSync();

    // Before the backward pass whose gradients are to be averaged (a step's
    // last micro-batch): buckets start as backward finishes them.
    void arm();
    // After that backward: returns when every bucket is averaged.
    void finish();
    // The bucket machinery, or null in a world of one (for its timings).
    const GradientSync* buckets() const { return sync_.get(); }

private:
    ParamSet<float>& params_;
    std::unique_ptr<GradientSync> sync_;
};

template <class Model> class DataParallel {
public:
    explicit DataParallel(Model& model, std::int64_t bucket_bytes = ParamSync::kDefaultBucketBytes)
        : model_(model), sync_(std::make_unique<ParamSync>(model.params(), bucket_bytes)) {}

    Model& module() { return model_; }

    // model.forward(args...) then model.backward(). With `sync` (the last
    // micro-batch of a step) the gradients are averaged over ranks, in buckets
    // overlapping backward, before it returns; without, they only accumulate.
    // Returns this rank's loss.
    template <class... Args> float forward_backward(bool sync, Args&&... args) {
        if (sync) sync_->arm();
        const float loss = model_.forward(std::forward<Args>(args)...);
        model_.backward();
        if (sync) sync_->finish();
        return loss;
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
