// GPT: the GPT-2 architecture (decoder-only transformer) built from kernels/.
//
// Pre-LN blocks (x + attn(ln1(x)), then x + mlp(ln2(x))), learned positions,
// GELU (tanh) MLP of width 4C, a final layernorm, and the output projection tied
// to the token embedding. Parameters and gradients live in one flat ParamSet.
#pragma once

#include "framework/core/arena.hpp"
#include "framework/core/params.hpp"
#include "framework/core/rng.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace levers::models {

class GptCard;

struct GptConfig {
    int vocab_size = 256;
    int block_size = 128;  // longest context
    int n_layer = 4;
    int n_head = 4;
    int n_embd = 128;

    void validate() const;                 // throws levers::Error naming the bad field
    std::int64_t parameter_count() const;  // without alignment padding
};

template <class T> class Gpt {
public:
    // Initialises like GPT-2: N(0, 0.02) weights, residual projections scaled by
    // 1/√(2·n_layer), zero biases, unit layernorm gains.
    Gpt(const GptConfig& config, std::uint64_t seed);

    // tokens[B, t] → logits[B, t, vocab]; with targets (ignore -100) also returns the
    // mean cross-entropy and keeps what backward() needs. t <= block_size.
    T forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch, std::int64_t time);
    // Adds d(loss)/d(params) into params().grads(). Needs a forward with targets.
    void backward();

    // LoRA fine-tuning: adds rank-`rank` adapters (kernels/lora.hpp, scale
    // alpha/rank) to every attention projection (c_attn and c_proj) and
    // freezes everything else. The adapters are lora_params(); backward then
    // computes only their gradients. Call once, after loading the weights.
    void enable_lora(int rank, double alpha, std::uint64_t seed);
    bool has_lora() const { return lora_rank_ > 0; }
    ParamSet<T>& lora_params() { return lora_; }
    // Folds the adapters into the frozen weights (the model then computes the
    // same function without them) and zeroes them.
    void merge_lora();

    // Moves the parameters (and LoRA adapters) to `device`; on a card,
    // forward and backward run there (models/gpt_cuda) and params() holds
    // card memory. Gpt<float> only. `compute` bf16: bf16 weights, activations
    // and gradients, f32 sums, the f32 parameters kept as master weights.
    void to_device(Device device, DType compute = DType::f32);
    DType compute_dtype() const { return compute_; }
    Device device() const { return params_.device(); }

    // On the host wherever the model runs; valid until the next forward/backward.
    const T* logits() const;
    ParamSet<T>& params() { return params_; }
    const ParamSet<T>& params() const { return params_; }
    const GptConfig& config() const { return config_; }
    // Bytes of activations and scratch held for the current batch shape.
    std::size_t activation_bytes() const;

private:
    struct LayerIds {
        int ln1_w, ln1_b, qkv_w, qkv_b, proj_w, proj_b, ln2_w, ln2_b, fc_w, fc_b, fc_proj_w, fc_proj_b;
    };
    struct LayerActs {
        T *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *x_mid;  // x_mid = x + attn branch
        T *ln2, *ln2_mean, *ln2_rstd, *fc, *fc_gelu, *x_out;
        T *lora_u_qkv, *lora_u_proj;  // in · Aᵀ of each adapter (LoRA only)
    };
    struct LoraIds {
        int qkv_a, qkv_b, proj_a, proj_b;
    };
    void init_weights(std::uint64_t seed);
    void ensure_activations(std::int64_t batch, std::int64_t time);
    T* scratch(std::int64_t elems);

    GptConfig config_;
    ParamSet<T> params_;
    int wte_, wpe_, lnf_w_, lnf_b_;
    std::vector<LayerIds> layer_ids_;
    ParamSet<T> lora_;
    std::vector<LoraIds> lora_ids_;
    int lora_rank_ = 0;
    T lora_scale_ = 0;

    Arena arena_;
    std::int64_t batch_ = 0, time_ = 0;
    std::vector<std::int32_t> tokens_, targets_;
    T* x0_ = nullptr;
    std::vector<LayerActs> acts_;
    T *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *logits_ = nullptr, *lse_ = nullptr;
    T *d_res_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr, *d_qkv_ = nullptr, *d_fc_ = nullptr, *d_lora_u_ = nullptr;
    bool has_targets_ = false;
    std::shared_ptr<GptCard> cuda_;  // set by to_device(a card)
    DType compute_ = dtype_of<T>();
};

extern template class Gpt<float>;
extern template class Gpt<double>;

}  // namespace levers::models
