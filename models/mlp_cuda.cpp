#include "models/mlp_cuda.hpp"

#include "framework/core/cuda_check.hpp"
#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "kernels/cuda/ops.hpp"
#include "models/card_weights.hpp"

#include <algorithm>
#include <type_traits>

namespace levers::models {

namespace cu = kernels::cuda;

namespace {

template <class S> class MlpCuda final : public MlpCard {
public:
    using A = cu::acc_t<S>;
    MlpCuda(std::vector<int> widths, std::vector<int> weight_ids, std::vector<int> bias_ids, ParamSet<float>& params)
        : widths_(std::move(widths)),
          weight_ids_(std::move(weight_ids)),
          bias_ids_(std::move(bias_ids)),
          params_(params),
          weights_(&params) {
        LEVERS_CHECK(!params.device().is_cpu(), "the MLP's card engine needs the parameters on a card");
    }
    float forward(const float* x, const std::int32_t* labels, std::int64_t batch) override;
    void backward() override;
    const float* host_logits() const override {
        const auto classes = static_cast<std::size_t>(widths_.back());
        copy_to_host(host_logits_, logits_, static_cast<std::size_t>(batch_), classes, classes);
        return host_logits_.data();
    }

private:
    void ensure_activations(std::int64_t batch);

    std::vector<int> widths_, weight_ids_, bias_ids_;
    ParamSet<float>& params_;
    CardWeights<S> weights_;
    CarvedBlock block_;  // the activations, carved per batch size
    std::int64_t batch_ = 0;
    bool has_labels_ = false;
    float* x_f32_ = nullptr;  // the inputs as they arrive
    S *x_ = nullptr, *logits_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr;
    A *lse_ = nullptr, *loss_ = nullptr;
    std::int32_t* labels_ = nullptr;
    std::vector<S*> pre_, post_;  // per hidden layer: before and after GELU
    mutable std::vector<float> host_logits_;
};

template <class S> void MlpCuda<S>::ensure_activations(std::int64_t batch) {
    if (batch == batch_) return;
    const std::int64_t widest = *std::max_element(widths_.begin(), widths_.end());
    block_.lay_out([&](CarvedBlock& block) {
        x_f32_ = block.take<float>(batch * widths_.front());
        x_ = std::is_same_v<S, float> ? reinterpret_cast<S*>(x_f32_) : block.take<S>(batch * widths_.front());
        logits_ = block.take<S>(batch * widths_.back());
        lse_ = block.take<A>(batch);
        loss_ = block.take<A>(1);
        d_a_ = block.take<S>(batch * widest);
        d_b_ = block.take<S>(batch * widest);
        labels_ = block.take<std::int32_t>(batch);
        pre_.clear();
        post_.clear();
        for (std::size_t h = 1; h + 1 < widths_.size(); ++h) {
            pre_.push_back(block.take<S>(batch * widths_[h]));
            post_.push_back(block.take<S>(batch * widths_[h]));
        }
    });
    batch_ = batch;
}

template <class S> float MlpCuda<S>::forward(const float* x, const std::int32_t* labels, std::int64_t batch) {
    ensure_activations(batch);
    const auto s = card_stream();
    weights_.refresh();
    const std::int64_t inputs = batch * widths_.front();
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(x_f32_, x, static_cast<std::size_t>(inputs) * sizeof(float),
                                      cudaMemcpyHostToDevice, s));
    if constexpr (!std::is_same_v<S, float>) cu::convert(x_, x_f32_, inputs, s);
    const S* in = x_;
    const std::size_t layers = weight_ids_.size();
    for (std::size_t l = 0; l < layers; ++l) {
        const S *w = weights_.at(weight_ids_[l]), *b = weights_.at(bias_ids_[l]);
        if (l + 1 == layers) {
            cu::linear_forward(logits_, in, w, b, batch, widths_[l], widths_[l + 1], s);
        } else {
            cu::linear_gelu_forward(post_[l], pre_[l], in, w, b, batch, widths_[l], widths_[l + 1], s);
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
    A loss = 0;
    device_copy(&loss, loss_, sizeof loss);  // waits for the stream
    return static_cast<float>(loss);
}

template <class S> void MlpCuda<S>::backward() {
    LEVERS_CHECK(has_labels_, "MLP backward() needs a forward() with labels first");
    has_labels_ = false;
    const auto s = card_stream();
    const std::int64_t B = batch_;
    cu::cross_entropy_backward(logits_, lse_, logits_, labels_, A(1), B, widths_.back(), s);
    S* d_out = logits_;
    for (std::size_t l = weight_ids_.size(); l-- > 0;) {
        S *d_w = weights_.grad(weight_ids_[l]), *d_b = weights_.grad(bias_ids_[l]), *w = weights_.at(weight_ids_[l]);
        if (l == 0) {
            cu::linear_backward(static_cast<S*>(nullptr), d_w, d_b, d_out, x_, w, B, widths_[0], widths_[1], s);
        } else {  // the gradient at the previous layer's GELU input
            S* d_in = d_out == d_a_ ? d_b_ : d_a_;
            cu::linear_gelu_backward(d_in, d_w, d_b, d_out, post_[l - 1], pre_[l - 1], w, B, widths_[l],
                                     widths_[l + 1], s);
            d_out = d_in;
        }
        params_.grads_final_from(params_.entries()[static_cast<std::size_t>(weight_ids_[l])].offset);
    }
}

}  // namespace

std::shared_ptr<MlpCard> make_mlp_card(std::vector<int> widths, std::vector<int> weight_ids, std::vector<int> bias_ids,
                                       ParamSet<float>& params, DType compute) {
    LEVERS_CHECK(params.grad_dtype() == compute, "an MLP computing in {} needs its gradients in {}", name_of(compute),
                 name_of(compute));
    if (compute == DType::bf16)
        return std::make_shared<MlpCuda<cu::bf16>>(std::move(widths), std::move(weight_ids), std::move(bias_ids),
                                                   params);
    LEVERS_CHECK(compute == DType::f32, "an MLP on a card computes in f32 or bf16, not {}", name_of(compute));
    return std::make_shared<MlpCuda<float>>(std::move(widths), std::move(weight_ids), std::move(bias_ids), params);
}

}  // namespace levers::models
