// The GPT's forward and backward on an NVIDIA card: what Gpt<float> runs once
// moved there (Gpt::to_device). It computes with the model's own ParamSet,
// whose buffers then live on the card in the CPU model's layout, so the
// optimizer, gradient averaging and checkpoints treat both alike. In f32 it
// computes on the parameters themselves; in bf16 on a bf16 copy of them made
// at each forward (the ParamSet keeps the f32 master weights the optimizer
// updates), with activations and gradients in bf16 and every sum in f32.
// Kernels from kernels/cuda, queued on the process's compute stream. CUDA
// builds only.
#pragma once

#include "framework/core/dtype.hpp"
#include "framework/core/params.hpp"
#include "models/gpt.hpp"

#include <cstdint>
#include <memory>
#include <vector>

namespace levers::models {

class GptCard {
public:
    // LoRA adapters (Gpt::enable_lora), their ParamSet on the card too: per
    // layer the ids of c_attn's A and B, then c_proj's; the base is frozen.
    struct Lora {
        ParamSet<float>* params = nullptr;
        std::vector<std::vector<int>> ids;
        int rank = 0;
        float scale = 0;
    };
    virtual ~GptCard() = default;

    // tokens and targets on the host [batch, time], their shape checked by
    // Gpt::forward, the token ids here (the card does not check them). With
    // targets: the mean loss (waits for the card). Without: 0 (the logits are
    // there for host_logits()).
    virtual float forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch,
                          std::int64_t time) = 0;
    // Adds into the gradients (in the ParamSet's grad_dtype()), announcing each
    // finished layer to the ParamSet (gradient buckets start while backward goes on).
    virtual void backward() = 0;
    // The logits of the last forward, copied from the card (as f32) when asked for.
    virtual const float* host_logits() const = 0;
    virtual std::size_t activation_bytes() const = 0;
};

// Whether a GPT of `config` computing in `compute` runs attention fused
// (flash-style): in bf16 with head size 64, unless LEVERS_FUSED_ATTENTION=0
// asks for the GEMM path.
bool fused_attention(const GptConfig& config, DType compute);

// `params` (and `lora`'s) already on the current card, with gradients in
// `compute` (f32 or bf16).
std::shared_ptr<GptCard> make_gpt_card(const GptConfig& config, ParamSet<float>& params, GptCard::Lora lora,
                                       DType compute);

}  // namespace levers::models
