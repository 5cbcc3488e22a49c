// The GPT's forward and backward on an NVIDIA card: what Gpt<float> runs once
// moved there (Gpt::to_device). It computes with the model's own ParamSet,
// whose buffers then live on the card in the CPU model's layout, so the
// optimizer, gradient averaging and checkpoints treat both alike. Kernels
// from kernels/cuda, queued on the process's compute stream. CUDA builds only.
#pragma once

#include "framework/core/device_memory.hpp"
#include "framework/core/params.hpp"
#include "models/gpt.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace levers::models {

class GptCuda {
public:
    // LoRA adapters (Gpt::enable_lora), their ParamSet on the card too: per
    // layer the ids of c_attn's A and B, then c_proj's; the base is frozen.
    struct Lora {
        ParamSet<float>* params = nullptr;
        std::vector<std::vector<int>> ids;
        int rank = 0;
        float scale = 0;
    };
    // `params`: the GPT's parameters, already on the current card (and `lora`'s, if any).
    GptCuda(const GptConfig& config, ParamSet<float>& params, Lora lora);

    // tokens and targets on the host [batch, time], validated there. With
    // targets: the mean loss (waits for the card). Without: 0 (the logits are
    // there for host_logits()).
    float forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch, std::int64_t time);
    // Adds into the gradients, announcing each finished layer to the ParamSet
    // (gradient buckets start while backward goes on).
    void backward();

    // The logits of the last forward, copied from the card when asked for.
    const float* host_logits() const;
    std::size_t activation_bytes() const { return block_.bytes(); }

private:
    float* P(int id) const { return params_.param(id); }  // card pointers
    float* LP(std::size_t layer, int which) const { return lora_.params->param(lora_.ids[layer][which]); }
    float* LG(std::size_t layer, int which) const { return lora_.params->grad(lora_.ids[layer][which]); }
    void ensure_activations(std::int64_t batch, std::int64_t time);

    GptConfig config_;
    ParamSet<float>& params_;
    Lora lora_;
    std::vector<std::vector<int>> layer_ids_;  // per layer: the 12 ids in the CPU order
    int wte_, wpe_, lnf_w_, lnf_b_;

    CarvedBlock block_;  // the activations, carved per batch shape
    std::int64_t batch_ = 0, time_ = 0;
    bool has_targets_ = false;
    std::int32_t *tokens_ = nullptr, *targets_ = nullptr;
    struct Acts {
        float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *x_mid, *ln2, *ln2_mean, *ln2_rstd, *fc, *fc_gelu, *x_out;
        float *lora_u_qkv, *lora_u_proj;  // in · Aᵀ of each adapter (LoRA only)
    };
    std::vector<Acts> acts_;
    float *x0_ = nullptr, *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *logits_ = nullptr,
          *lse_ = nullptr, *loss_ = nullptr;
    float *d_res_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr, *d_qkv_ = nullptr, *d_fc_ = nullptr,
          *d_lora_u_ = nullptr;
    mutable std::vector<float> host_logits_;
};

}  // namespace levers::models
