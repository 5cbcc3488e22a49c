#include "models/gpt.hpp"

#include "framework/core/model_move.hpp"
#include "kernels/attention.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/embedding.hpp"
#include "kernels/gelu.hpp"
#include "kernels/layernorm.hpp"
#include "kernels/linear.hpp"
#include "kernels/lora.hpp"
#include "kernels/residual.hpp"

#if defined(LEVERS_CUDA)
#include "models/gpt_cuda.hpp"
#endif

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

namespace levers::models {

namespace k = kernels::cpu;

void GptConfig::validate() const {
    LEVERS_CHECK(vocab_size >= 2, "vocab_size must be >= 2, got {}", vocab_size);
    LEVERS_CHECK(block_size >= 1, "block_size must be >= 1, got {}", block_size);
    LEVERS_CHECK(n_layer >= 1, "n_layer must be >= 1, got {}", n_layer);
    LEVERS_CHECK(n_head >= 1 && n_embd >= 1 && n_embd % n_head == 0,
                 "n_embd ({}) must be a positive multiple of n_head ({})", n_embd, n_head);
}

std::int64_t GptConfig::parameter_count() const {
    std::int64_t c = n_embd;
    std::int64_t per_layer = 2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c);
    return std::int64_t{vocab_size} * c + std::int64_t{block_size} * c + n_layer * per_layer + 2 * c;
}

template <class T> Gpt<T>::Gpt(const GptConfig& config, std::uint64_t seed) : config_(config) {
    config_.validate();
    const std::int64_t C = config_.n_embd, V = config_.vocab_size;
    wte_ = params_.add("wte", {V, C}, true);
    wpe_ = params_.add("wpe", {config_.block_size, C}, true);
    for (int l = 0; l < config_.n_layer; ++l) {
        auto name = [l](const char* what) { return "h." + std::to_string(l) + "." + what; };
        LayerIds ids{};
        ids.ln1_w = params_.add(name("ln_1.weight"), {C}, false);
        ids.ln1_b = params_.add(name("ln_1.bias"), {C}, false);
        ids.qkv_w = params_.add(name("attn.c_attn.weight"), {3 * C, C}, true);
        ids.qkv_b = params_.add(name("attn.c_attn.bias"), {3 * C}, false);
        ids.proj_w = params_.add(name("attn.c_proj.weight"), {C, C}, true);
        ids.proj_b = params_.add(name("attn.c_proj.bias"), {C}, false);
        ids.ln2_w = params_.add(name("ln_2.weight"), {C}, false);
        ids.ln2_b = params_.add(name("ln_2.bias"), {C}, false);
        ids.fc_w = params_.add(name("mlp.c_fc.weight"), {4 * C, C}, true);
        ids.fc_b = params_.add(name("mlp.c_fc.bias"), {4 * C}, false);
        ids.fc_proj_w = params_.add(name("mlp.c_proj.weight"), {C, 4 * C}, true);
        ids.fc_proj_b = params_.add(name("mlp.c_proj.bias"), {C}, false);
        layer_ids_.push_back(ids);
    }
    lnf_w_ = params_.add("ln_f.weight", {C}, false);
    lnf_b_ = params_.add("ln_f.bias", {C}, false);
    params_.allocate();
    init_weights(seed);
}

template <class T> void Gpt<T>::init_weights(std::uint64_t seed) {
    Rng rng(seed);
    const double residual_std = 0.02 / std::sqrt(2.0 * config_.n_layer);
    for (const auto& e : params_.entries()) {
        T* p = params_.params().template data<T>() + e.offset;
        const std::int64_t n = e.shape.numel();
        bool is_gain = e.name.ends_with("ln_1.weight") || e.name.ends_with("ln_2.weight") || e.name == "ln_f.weight";
        bool is_residual_proj = e.name.ends_with("c_proj.weight");
        if (is_gain) {
            for (std::int64_t i = 0; i < n; ++i) p[i] = T(1);
        } else if (e.shape.ndim() == 2) {
            double std = is_residual_proj ? residual_std : 0.02;
            for (std::int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(rng.normal() * std);
        }  // biases stay zero
    }
}

template <class T> T* Gpt<T>::scratch(std::int64_t elems) {
    return reinterpret_cast<T*>(arena_.alloc(static_cast<std::size_t>(elems) * sizeof(T)).get());
}

template <class T> void Gpt<T>::ensure_activations(std::int64_t batch, std::int64_t time) {
    if (batch == batch_ && time == time_) return;
    arena_.reset();
    batch_ = batch;
    time_ = time;
    const std::int64_t BT = batch * time, C = config_.n_embd, H = config_.n_head, V = config_.vocab_size;
    x0_ = scratch(BT * C);
    acts_.assign(static_cast<std::size_t>(config_.n_layer), LayerActs{});
    for (LayerActs& a : acts_) {
        a.ln1 = scratch(BT * C);
        a.ln1_mean = scratch(BT);
        a.ln1_rstd = scratch(BT);
        a.qkv = scratch(BT * 3 * C);
        a.att = scratch(batch * H * time * time);
        a.atty = scratch(BT * C);
        a.x_mid = scratch(BT * C);
        a.ln2 = scratch(BT * C);
        a.ln2_mean = scratch(BT);
        a.ln2_rstd = scratch(BT);
        a.fc = scratch(BT * 4 * C);
        a.fc_gelu = scratch(BT * 4 * C);
        a.x_out = scratch(BT * C);
        a.lora_u_qkv = lora_rank_ ? scratch(BT * lora_rank_) : nullptr;
        a.lora_u_proj = lora_rank_ ? scratch(BT * lora_rank_) : nullptr;
    }
    lnf_ = scratch(BT * C);
    lnf_mean_ = scratch(BT);
    lnf_rstd_ = scratch(BT);
    logits_ = scratch(BT * V);
    lse_ = scratch(BT);
    d_res_ = scratch(BT * C);
    d_a_ = scratch(BT * C);
    d_b_ = scratch(BT * C);
    d_qkv_ = scratch(BT * 3 * C);
    d_fc_ = scratch(BT * 4 * C);
    d_lora_u_ = lora_rank_ ? scratch(BT * lora_rank_) : nullptr;
}

template <class T> void Gpt<T>::to_device(Device device, DType compute) {
    if (!needs_move_to_card("a GPT", params_.device(), compute_, device, compute, dtype_of<T>())) return;
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>) {  // the only parameters needs_move_to_card lets through
        params_.to_device(device, compute);
        GptCard::Lora lora;
        if (lora_rank_ > 0) {
            lora_.to_device(device, compute);
            lora = {&lora_, {}, lora_rank_, lora_scale_};
            for (const LoraIds& l : lora_ids_) lora.ids.push_back({l.qkv_a, l.qkv_b, l.proj_a, l.proj_b});
        }
        cuda_ = make_gpt_card(config_, params_, std::move(lora), compute);
        compute_ = compute;
        arena_ = Arena();  // the CPU activations are not used any more
        batch_ = time_ = 0;
    }
#endif
}

template <class T> const T* Gpt<T>::logits() const {
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>)
        if (cuda_) return cuda_->host_logits();
#endif
    return logits_;
}

template <class T> std::size_t Gpt<T>::activation_bytes() const {
#if defined(LEVERS_CUDA)
    if (cuda_) return cuda_->activation_bytes();
#endif
    return arena_.capacity_bytes();
}

template <class T>
T Gpt<T>::forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch, std::int64_t time) {
    LEVERS_CHECK(batch >= 1 && time >= 1 && time <= config_.block_size,
                 "GPT forward needs batch >= 1 and 1 <= time <= block_size ({}), got batch {} time {}",
                 config_.block_size, batch, time);
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>)
        if (cuda_) return cuda_->forward(tokens, targets, batch, time);
#endif
    ensure_activations(batch, time);
    const std::int64_t B = batch, Tm = time, BT = B * Tm, C = config_.n_embd, H = config_.n_head;
    const std::int64_t V = config_.vocab_size;
    auto P = [this](int id) { return params_.param(id); };

    tokens_.assign(tokens, tokens + BT);
    k::embedding_forward(x0_, tokens, P(wte_), P(wpe_), B, Tm, C, V);
    const T* x = x0_;
    for (std::size_t l = 0; l < acts_.size(); ++l) {
        const LayerIds& id = layer_ids_[l];
        LayerActs& a = acts_[l];
        k::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, P(id.ln1_w), P(id.ln1_b), BT, C);
        k::linear_forward(a.qkv, a.ln1, P(id.qkv_w), P(id.qkv_b), BT, C, 3 * C);
        if (lora_rank_) {
            const LoraIds& lid = lora_ids_[l];
            k::lora_forward(a.qkv, a.lora_u_qkv, a.ln1, lora_.param(lid.qkv_a), lora_.param(lid.qkv_b), BT, C, 3 * C,
                            lora_rank_, lora_scale_);
        }
        k::attention_forward(a.atty, a.att, a.qkv, B, Tm, C, H);
        k::linear_forward(a.x_mid, a.atty, P(id.proj_w), P(id.proj_b), BT, C, C);
        if (lora_rank_) {
            const LoraIds& lid = lora_ids_[l];
            k::lora_forward(a.x_mid, a.lora_u_proj, a.atty, lora_.param(lid.proj_a), lora_.param(lid.proj_b), BT, C, C,
                            lora_rank_, lora_scale_);
        }
        k::residual_forward(a.x_mid, x, a.x_mid, BT * C);
        k::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.x_mid, P(id.ln2_w), P(id.ln2_b), BT, C);
        k::linear_forward(a.fc, a.ln2, P(id.fc_w), P(id.fc_b), BT, C, 4 * C);
        k::gelu_forward(a.fc_gelu, a.fc, BT * 4 * C);
        k::linear_forward(a.x_out, a.fc_gelu, P(id.fc_proj_w), P(id.fc_proj_b), BT, 4 * C, C);
        k::residual_forward(a.x_out, a.x_mid, a.x_out, BT * C);
        x = a.x_out;
    }
    k::layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, P(lnf_w_), P(lnf_b_), BT, C);
    k::linear_forward(logits_, lnf_, P(wte_), static_cast<const T*>(nullptr), BT, C, V);  // tied output

    has_targets_ = targets != nullptr;
    if (!has_targets_) return T(0);
    targets_.assign(targets, targets + BT);
    return k::cross_entropy_forward(lse_, logits_, targets, BT, V);
}

template <class T> void Gpt<T>::backward() {
#if defined(LEVERS_CUDA)
    if constexpr (std::is_same_v<T, float>)
        if (cuda_) return cuda_->backward();
#endif
    LEVERS_CHECK(has_targets_, "GPT backward() needs a forward() with targets first");
    has_targets_ = false;  // the logits are overwritten by their gradient below
    const std::int64_t B = batch_, Tm = time_, BT = B * Tm, C = config_.n_embd, H = config_.n_head;
    const std::int64_t V = config_.vocab_size;
    const bool frozen = lora_rank_ > 0;  // with LoRA only the adapters learn
    auto P = [this](int id) { return params_.param(id); };
    auto G = [this, frozen](int id) { return frozen ? static_cast<T*>(nullptr) : params_.grad(id); };

    T* d_logits = logits_;  // in place
    k::cross_entropy_backward(d_logits, lse_, logits_, targets_.data(), T(1), BT, V);
    k::linear_backward(d_a_, G(wte_), static_cast<T*>(nullptr), d_logits, lnf_, P(wte_), BT, C, V);
    const T* x_last = acts_.back().x_out;
    k::layernorm_backward(d_res_, G(lnf_w_), G(lnf_b_), d_a_, x_last, lnf_mean_, lnf_rstd_, P(lnf_w_), BT, C);

    // d_res_ carries d(loss)/d(residual stream); each branch's gradient is added to it.
    for (std::size_t l = acts_.size(); l-- > 0;) {
        const LayerIds& id = layer_ids_[l];
        const LayerActs& a = acts_[l];
        const T* x_in = l == 0 ? x0_ : acts_[l - 1].x_out;
        // MLP branch: x_out = x_mid + proj(gelu(fc(ln2(x_mid)))).
        k::linear_backward(d_fc_, G(id.fc_proj_w), G(id.fc_proj_b), d_res_, a.fc_gelu, P(id.fc_proj_w), BT, 4 * C, C);
        k::gelu_backward(d_fc_, d_fc_, a.fc, BT * 4 * C);
        k::linear_backward(d_a_, G(id.fc_w), G(id.fc_b), d_fc_, a.ln2, P(id.fc_w), BT, C, 4 * C);
        k::layernorm_backward(d_b_, G(id.ln2_w), G(id.ln2_b), d_a_, a.x_mid, a.ln2_mean, a.ln2_rstd, P(id.ln2_w), BT,
                              C);
        k::residual_forward(d_res_, d_res_, d_b_, BT * C);
        // Attention branch: x_mid = x_in + proj(attn(qkv(ln1(x_in)))).
        k::linear_backward(d_a_, G(id.proj_w), G(id.proj_b), d_res_, a.atty, P(id.proj_w), BT, C, C);
        if (frozen) {
            const LoraIds& lid = lora_ids_[l];
            k::lora_backward(d_a_, lora_.grad(lid.proj_a), lora_.grad(lid.proj_b), d_lora_u_, d_res_, a.atty,
                             a.lora_u_proj, lora_.param(lid.proj_a), lora_.param(lid.proj_b), BT, C, C, lora_rank_,
                             lora_scale_);
        }
        k::attention_backward(d_qkv_, d_a_, a.att, a.qkv, B, Tm, C, H);
        k::linear_backward(d_a_, G(id.qkv_w), G(id.qkv_b), d_qkv_, a.ln1, P(id.qkv_w), BT, C, 3 * C);
        if (frozen) {
            const LoraIds& lid = lora_ids_[l];
            k::lora_backward(d_a_, lora_.grad(lid.qkv_a), lora_.grad(lid.qkv_b), d_lora_u_, d_qkv_, a.ln1,
                             a.lora_u_qkv, lora_.param(lid.qkv_a), lora_.param(lid.qkv_b), BT, C, 3 * C, lora_rank_,
                             lora_scale_);
        }
        k::layernorm_backward(d_b_, G(id.ln1_w), G(id.ln1_b), d_a_, x_in, a.ln1_mean, a.ln1_rstd, P(id.ln1_w), BT, C);
        k::residual_forward(d_res_, d_res_, d_b_, BT * C);
        // Layers l.. (and ln_f) are done; wte, first in the buffer, waits for the embedding.
        if (frozen)
            lora_.grads_final_from(lora_.entries()[static_cast<std::size_t>(lora_ids_[l].qkv_a)].offset);
        else
            params_.grads_final_from(params_.entries()[static_cast<std::size_t>(id.ln1_w)].offset);
    }
    if (!frozen) k::embedding_backward(G(wte_), G(wpe_), d_res_, tokens_.data(), B, Tm, C);
}

template <class T> void Gpt<T>::enable_lora(int rank, double alpha, std::uint64_t seed) {
    LEVERS_CHECK(rank >= 1 && rank <= config_.n_embd, "lora rank must be in 1..n_embd ({}), got {}", config_.n_embd,
                 rank);
    LEVERS_CHECK(alpha > 0, "lora alpha must be positive, got {}", alpha);
    LEVERS_CHECK(lora_rank_ == 0, "this GPT already has LoRA adapters");
    LEVERS_CHECK(params_.device().is_cpu(), "enable_lora() on a GPT on {}: add adapters before to_device()",
                 params_.device().str());
    const std::int64_t C = config_.n_embd, R = rank;
    for (int l = 0; l < config_.n_layer; ++l) {
        auto name = [l](const char* what) { return "h." + std::to_string(l) + "." + what; };
        lora_ids_.push_back({lora_.add(name("attn.c_attn.lora_a"), {R, C}, true),
                             lora_.add(name("attn.c_attn.lora_b"), {3 * C, R}, true),
                             lora_.add(name("attn.c_proj.lora_a"), {R, C}, true),
                             lora_.add(name("attn.c_proj.lora_b"), {C, R}, true)});
    }
    lora_.allocate();  // B = 0: the adapted model starts as the frozen one
    // A ~ U(-1/√C, 1/√C), as PEFT's Kaiming-uniform default for nn.Linear.
    Rng rng(seed);
    const double bound = 1.0 / std::sqrt(static_cast<double>(C));
    for (const auto& ids : lora_ids_)
        for (int a : {ids.qkv_a, ids.proj_a}) {
            T* p = lora_.param(a);
            for (std::int64_t i = 0; i < R * C; ++i) p[i] = static_cast<T>((2 * rng.uniform() - 1) * bound);
        }
    lora_rank_ = rank;
    lora_scale_ = static_cast<T>(alpha / rank);
    batch_ = time_ = 0;  // activations are laid out again with the adapters' buffers
}

template <class T> void Gpt<T>::merge_lora() {
    LEVERS_CHECK(lora_rank_ > 0, "merge_lora(): this GPT has no LoRA adapters");
    const std::int64_t C = config_.n_embd;
    // W += scale · B·A on the host (once per run: a copy there and back is
    // cheap next to training, wherever the weights live).
    auto merge = [&](int w, int a, int b, std::int64_t out) {
        Tensor hw = params_.param_tensor(w).to(Device::cpu());
        const Tensor ha = lora_.param_tensor(a).to(Device::cpu()), hb = lora_.param_tensor(b).to(Device::cpu());
        k::lora_merge(hw.data<T>(), ha.data<T>(), hb.data<T>(), C, out, lora_rank_, lora_scale_);
        params_.param_tensor(w).copy_from(hw);
        lora_.param_tensor(b).zero();
    };
    for (std::size_t l = 0; l < lora_ids_.size(); ++l) {
        const LoraIds& lid = lora_ids_[l];
        merge(layer_ids_[l].qkv_w, lid.qkv_a, lid.qkv_b, 3 * C);
        merge(layer_ids_[l].proj_w, lid.proj_a, lid.proj_b, C);
    }
}

template class Gpt<float>;
template class Gpt<double>;

}  // namespace levers::models
