#include "models/mlp_cuda.hpp"

#include "framework/core/cuda_check.hpp"
#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "kernels/cuda/ops.hpp"

#include <algorithm>

namespace levers::models {

namespace cu = kernels::cuda;

namespace {
cudaStream_t stream() { return static_cast<cudaStream_t>(compute_stream()); }
}  // namespace

MlpCuda::MlpCuda(std::vector<int> widths, std::vector<int> weight_ids, std::vector<int> bias_ids,
                 ParamSet<float>& params)
    : widths_(std::move(widths)), weight_ids_(std::move(weight_ids)), bias_ids_(std::move(bias_ids)), params_(params) {
    LEVERS_CHECK(!params.device().is_cpu(), "MlpCuda needs the parameters on a card");
}

void MlpCuda::ensure_activations(std::int64_t batch) {
    if (batch == batch_) return;
    const std::int64_t widest = *std::max_element(widths_.begin(), widths_.end());
    block_.lay_out([&](CarvedBlock& block) {
        x_ = block.take(batch * widths_.front());
        logits_ = block.take(batch * widths_.back());
        lse_ = block.take(batch);
        loss_ = block.take(1);
        d_a_ = block.take(batch * widest);
        d_b_ = block.take(batch * widest);
        labels_ = block.take<std::int32_t>(batch);
        pre_.clear();
        post_.clear();
        for (std::size_t h = 1; h + 1 < widths_.size(); ++h) {
            pre_.push_back(block.take(batch * widths_[h]));
            post_.push_back(block.take(batch * widths_[h]));
        }
    });
    batch_ = batch;
}

float MlpCuda::forward(const float* x, const std::int32_t* labels, std::int64_t batch) {
    LEVERS_CHECK(batch >= 1, "MLP forward needs batch >= 1, got {}", batch);
    ensure_activations(batch);
    const auto s = stream();
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(x_, x, static_cast<std::size_t>(batch * widths_.front()) * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
    const float* in = x_;
    const std::size_t layers = weight_ids_.size();
    for (std::size_t l = 0; l < layers; ++l) {
        float* out = l + 1 == layers ? logits_ : pre_[l];
        cu::linear_forward(out, in, params_.param(weight_ids_[l]), params_.param(bias_ids_[l]), batch, widths_[l],
                           widths_[l + 1], s);
        if (l + 1 < layers) {
            cu::gelu_forward(post_[l], pre_[l], batch * widths_[l + 1], s);
            in = post_[l];
        }
    }
    const std::int64_t classes = widths_.back();
    has_labels_ = labels != nullptr;
    if (!has_labels_) return 0;
    for (std::int64_t i = 0; i < batch; ++i)
        LEVERS_CHECK(labels[i] >= 0 && labels[i] < classes, "label {} at {} is outside 0..{}", labels[i], i,
                     classes - 1);
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(labels_, labels, static_cast<std::size_t>(batch) * sizeof(std::int32_t),
                                      cudaMemcpyHostToDevice, s));
    cu::cross_entropy_forward(loss_, lse_, logits_, labels_, batch, classes, s);
    float loss = 0;
    device_copy(&loss, loss_, sizeof loss);  // waits for the stream
    return loss;
}

void MlpCuda::backward() {
    LEVERS_CHECK(has_labels_, "MLP backward() needs a forward() with labels first");
    has_labels_ = false;
    const auto s = stream();
    const std::int64_t B = batch_;
    cu::cross_entropy_backward(logits_, lse_, logits_, labels_, 1.0f, B, widths_.back(), s);
    float* d_out = logits_;
    for (std::size_t l = weight_ids_.size(); l-- > 0;) {
        const float* in = l == 0 ? x_ : post_[l - 1];
        float* d_in = l == 0 ? nullptr : (d_out == d_a_ ? d_b_ : d_a_);
        cu::linear_backward(d_in, params_.grad(weight_ids_[l]), params_.grad(bias_ids_[l]), d_out, in,
                            params_.param(weight_ids_[l]), B, widths_[l], widths_[l + 1], s);
        params_.grads_final_from(params_.entries()[static_cast<std::size_t>(weight_ids_[l])].offset);
        if (l == 0) break;
        cu::gelu_backward(d_in, d_in, pre_[l - 1], B * widths_[l], s);
        d_out = d_in;
    }
}

const float* MlpCuda::host_logits() const {
    host_logits_.resize(static_cast<std::size_t>(batch_ * widths_.back()));
    device_copy(host_logits_.data(), logits_, host_logits_.size() * sizeof(float));
    return host_logits_.data();
}

}  // namespace levers::models
