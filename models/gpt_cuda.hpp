// GPT on one NVIDIA card, in f32: the CPU Gpt's architecture and parameter
// layout (so parameters cross as one flat buffer), forward and backward
// through kernels/cuda on one stream, AdamW fused on the card. CUDA builds
// only; a first version, for the parity test and gpu_check's throughput.
#pragma once

#include "framework/core/params.hpp"
#include "kernels/adamw.hpp"
#include "models/gpt.hpp"

#include <cstdint>
#include <vector>

namespace levers::models {

class GptCuda {
public:
    // The model `host` describes, its parameters copied to the current card.
    explicit GptCuda(const Gpt<float>& host);
    ~GptCuda();
    GptCuda(const GptCuda&) = delete;
    GptCuda& operator=(const GptCuda&) = delete;

    // tokens and targets on the host [batch, time]; returns the mean loss (waits for the card).
    float forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch, std::int64_t time);
    void backward();  // adds into the gradients
    void zero_grad();
    double clip_grad_norm(double max_norm);
    void adamw_step(const kernels::AdamWHyper& hyper, double lr);  // decay where the CPU model decays

    std::vector<float> parameters() const;  // copies back to the host, in the CPU layout
    std::vector<float> gradients() const;
    std::int64_t size() const { return size_; }
    void synchronize() const;

private:
    struct Layer;
    float* P(int id) const;
    float* G(int id) const;
    void ensure_activations(std::int64_t batch, std::int64_t time);
    float* take(std::int64_t elems);
    std::vector<float> to_host(const float* device) const;  // size() floats, waiting for the stream

    GptConfig config_;
    std::vector<ParamSet<float>::Entry> entries_;
    std::vector<std::vector<int>> layer_ids_;  // per layer: the 12 ids in the CPU order
    int wte_, wpe_, lnf_w_, lnf_b_;
    std::int64_t size_ = 0;
    float *params_ = nullptr, *grads_ = nullptr, *m_ = nullptr, *v_ = nullptr;
    long steps_ = 0;
    void* stream_ = nullptr;  // cudaStream_t

    // Activations: one device block carved per batch shape.
    char* block_ = nullptr;
    std::size_t used_ = 0;  // bytes carved so far
    std::int64_t batch_ = 0, time_ = 0;
    std::int32_t *tokens_ = nullptr, *targets_ = nullptr;
    struct Acts {
        float *ln1, *ln1_mean, *ln1_rstd, *qkv, *att, *atty, *x_mid, *ln2, *ln2_mean, *ln2_rstd, *fc, *fc_gelu, *x_out;
    };
    std::vector<Acts> acts_;
    float *x0_ = nullptr, *lnf_ = nullptr, *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *logits_ = nullptr,
          *lse_ = nullptr, *loss_ = nullptr;
    float *d_res_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr, *d_qkv_ = nullptr, *d_fc_ = nullptr;
};

}  // namespace levers::models
