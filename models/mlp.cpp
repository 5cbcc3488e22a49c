#include "models/mlp.hpp"

#include "framework/core/model_move.hpp"
#include "framework/core/rng.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/gelu.hpp"
#include "kernels/linear.hpp"

#if defined(LEVERS_CUDA)
#include "models/mlp_cuda.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace levers::models {

namespace k = kernels::cpu;

void MlpConfig::validate() const {
    LEVERS_CHECK(inputs >= 1, "MLP inputs must be >= 1, got {}", inputs);
    LEVERS_CHECK(classes >= 2, "MLP classes must be >= 2, got {}", classes);
    for (int h : hidden) LEVERS_CHECK(h >= 1, "MLP hidden widths must be >= 1, got {}", h);
}

template <class T> Mlp<T>::Mlp(const MlpConfig& config, std::uint64_t seed) : config_(config) {
    config_.validate();
    widths_.push_back(config_.inputs);
    widths_.insert(widths_.end(), config_.hidden.begin(), config_.hidden.end());
    widths_.push_back(config_.classes);
    for (std::size_t l = 0; l + 1 < widths_.size(); ++l) {
        weight_ids_.push_back(params_.add("layers." + std::to_string(l) + ".weight", {widths_[l + 1], widths_[l]}, true));
        bias_ids_.push_back(params_.add("layers." + std::to_string(l) + ".bias", {widths_[l + 1]}, false));
    }
    params_.allocate();
    Rng rng(seed);
    for (std::size_t l = 0; l < weight_ids_.size(); ++l) {
        const double bound = 1.0 / std::sqrt(static_cast<double>(widths_[l]));
        T* w = params_.param(weight_ids_[l]);
        for (std::int64_t i = 0; i < std::int64_t{widths_[l]} * widths_[l + 1]; ++i)
            w[i] = static_cast<T>((2 * rng.uniform() - 1) * bound);
    }
}

template <class T> void Mlp<T>::ensure_activations(std::int64_t batch) {
    if (batch == batch_) return;
    arena_.reset();
    batch_ = batch;
    auto alloc = [&](std::int64_t n) {
        return reinterpret_cast<T*>(arena_.alloc(static_cast<std::size_t>(n) * sizeof(T)).get());
    };
    pre_.clear();
    post_.clear();
    int widest = *std::max_element(widths_.begin(), widths_.end());
    for (int h : config_.hidden) {
        pre_.push_back(alloc(batch * h));
        post_.push_back(alloc(batch * h));
    }
    logits_ = alloc(batch * config_.classes);
    lse_ = alloc(batch);
    d_a_ = alloc(batch * widest);
    d_b_ = alloc(batch * widest);
}

template <class T> void Mlp<T>::to_device(Device device, DType compute) {
    if (!needs_move_to_card("an MLP", params_.device(), compute_, device, compute, dtype_of<T>())) return;
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>) {  // the only parameters needs_move_to_card lets through
        params_.to_device(device, compute);
        cuda_ = make_mlp_card(widths_, weight_ids_, bias_ids_, params_, compute);
        compute_ = compute;
        arena_ = Arena();
        batch_ = 0;
    }
#endif
}

template <class T> const T* Mlp<T>::logits() const {
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>)
        if (cuda_) return cuda_->host_logits();
#endif
    return logits_;
}

template <class T> T Mlp<T>::forward(const T* x, const std::int32_t* labels, std::int64_t batch) {
    LEVERS_CHECK(batch >= 1, "MLP forward needs batch >= 1, got {}", batch);
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>)
        if (cuda_) return cuda_->forward(x, labels, batch);
#endif
    ensure_activations(batch);
    x_ = x;
    const T* in = x;
    const std::size_t layers = weight_ids_.size();
    for (std::size_t l = 0; l < layers; ++l) {
        T* out = l + 1 == layers ? logits_ : pre_[l];
        k::linear_forward(out, in, params_.param(weight_ids_[l]), params_.param(bias_ids_[l]), batch, widths_[l],
                          widths_[l + 1]);
        if (l + 1 < layers) {
            k::gelu_forward(post_[l], pre_[l], batch * widths_[l + 1]);
            in = post_[l];
        }
    }
    has_labels_ = labels != nullptr;
    if (!has_labels_) return T(0);
    labels_.assign(labels, labels + batch);
    return k::cross_entropy_forward(lse_, logits_, labels, batch, config_.classes);
}

template <class T> void Mlp<T>::backward() {
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>)
        if (cuda_) return cuda_->backward();
#endif
    LEVERS_CHECK(has_labels_, "MLP backward() needs a forward() with labels first");
    has_labels_ = false;
    const std::int64_t B = batch_;
    k::cross_entropy_backward(logits_, lse_, logits_, labels_.data(), T(1), B, config_.classes);
    T* d_out = logits_;
    for (std::size_t l = weight_ids_.size(); l-- > 0;) {
        const T* in = l == 0 ? x_ : post_[l - 1];
        T* d_in = l == 0 ? nullptr : (d_out == d_a_ ? d_b_ : d_a_);
        k::linear_backward(d_in, params_.grad(weight_ids_[l]), params_.grad(bias_ids_[l]), d_out, in,
                           params_.param(weight_ids_[l]), B, widths_[l], widths_[l + 1]);
        params_.grads_final_from(params_.entries()[static_cast<std::size_t>(weight_ids_[l])].offset);
        if (l == 0) break;
        k::gelu_backward(d_in, d_in, pre_[l - 1], B * widths_[l]);
        d_out = d_in;
    }
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace levers::models
