#include "models/gpt_cuda.hpp"

#include "framework/core/cuda_check.hpp"
#include "framework/core/device_memory.hpp"
#include "framework/core/error.hpp"
#include "kernels/cross_entropy.hpp"
#include "kernels/cuda/ops.hpp"
#include "models/card_weights.hpp"

#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

namespace levers::models {

namespace cu = kernels::cuda;

namespace {
// The 12 parameter names of a block, in the CPU model's order.
const char* kLayerParams[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                              "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                              "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCP_W, FCP_B };
enum { QKV_A, QKV_LB, PROJ_A, PROJ_LB };  // a layer's LoRA ids, as Gpt keeps them

template <class S> class GptCuda final : public GptCard {
public:
    using A = cu::acc_t<S>;
    GptCuda(const GptConfig& config, ParamSet<float>& params, Lora lora);
    float forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch,
                  std::int64_t time) override;
    void backward() override;
    const float* host_logits() const override;
    std::size_t activation_bytes() const override { return block_.bytes(); }

private:
    S* P(int id) const { return weights_.at(id); }  // card pointers
    S* LP(std::size_t layer, int which) const { return lora_weights_.at(lora_.ids[layer][which]); }
    S* LG(std::size_t layer, int which) const { return lora_weights_.grad(lora_.ids[layer][which]); }
    void ensure_activations(std::int64_t batch, std::int64_t time);
    // Logits rows are this far apart: the vocabulary rounded up to 64, so
    // every row of the products starts aligned (50257 is odd).
    std::int64_t padded_vocab() const { return (config_.vocab_size + 63) / 64 * 64; }

    GptConfig config_;
    ParamSet<float>& params_;
    Lora lora_;
    CardWeights<S> weights_, lora_weights_;
    std::vector<std::vector<int>> layer_ids_;  // per layer: the 12 ids in the CPU order
    int wte_, wpe_, lnf_w_, lnf_b_;

    CarvedBlock block_;  // the activations, carved per batch shape
    std::int64_t batch_ = 0, time_ = 0;
    bool has_targets_ = false;
    std::int32_t *tokens_ = nullptr, *targets_ = nullptr;
    // Attention without the [T, T] matrices (flash style): fused_attention().
    const bool fused_attention_ = fused_attention(config_, std::is_same_v<S, cu::bf16> ? DType::bf16 : DType::f32);
    struct Acts {
        S *ln1, *qkv, *att, *atty, *x_mid, *ln2, *fc, *fc_gelu, *x_out;
        A *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd;
        float* att_lse;  // fused attention: each query row's log-sum-exp
        S *lora_u_qkv, *lora_u_proj;  // in · Aᵀ of each adapter (LoRA only)
    };
    std::vector<Acts> acts_;
    S *x0_ = nullptr, *lnf_ = nullptr, *logits_ = nullptr;
    A *lnf_mean_ = nullptr, *lnf_rstd_ = nullptr, *lse_ = nullptr, *loss_ = nullptr;
    S *d_res_ = nullptr, *d_a_ = nullptr, *d_b_ = nullptr, *d_qkv_ = nullptr, *d_fc_ = nullptr, *d_lora_u_ = nullptr;
    mutable std::vector<float> host_logits_;
};

template <class S>
GptCuda<S>::GptCuda(const GptConfig& config, ParamSet<float>& params, Lora lora)
    : config_(config), params_(params), lora_(std::move(lora)), weights_(&params), lora_weights_(lora_.params) {
    LEVERS_CHECK(!params.device().is_cpu() && (!lora_.params || !lora_.params->device().is_cpu()),
                 "the GPT's card engine needs the parameters on a card");
    const auto& entries = params.entries();
    auto id_of = [&](const std::string& name) {
        for (std::size_t i = 0; i < entries.size(); ++i)
            if (entries[i].name == name) return static_cast<int>(i);
        LEVERS_FAIL("GPT parameter '{}' is missing", name);
    };
    wte_ = id_of("wte");
    wpe_ = id_of("wpe");
    lnf_w_ = id_of("ln_f.weight");
    lnf_b_ = id_of("ln_f.bias");
    for (int l = 0; l < config_.n_layer; ++l) {
        std::vector<int> ids;
        for (const char* p : kLayerParams) ids.push_back(id_of("h." + std::to_string(l) + "." + p));
        layer_ids_.push_back(ids);
    }
}

template <class S> void GptCuda<S>::ensure_activations(std::int64_t batch, std::int64_t time) {
    if (batch == batch_ && time == time_) return;
    const std::int64_t BT = batch * time, C = config_.n_embd, H = config_.n_head;
    const int rank = lora_.rank;
    block_.lay_out([&](CarvedBlock& block) {
        tokens_ = block.take<std::int32_t>(BT);
        targets_ = block.take<std::int32_t>(BT);
        x0_ = block.take<S>(BT * C);
        acts_.assign(static_cast<std::size_t>(config_.n_layer), Acts{});
        for (Acts& a : acts_) {
            a.ln1 = block.take<S>(BT * C);
            a.ln1_mean = block.take<A>(BT);
            a.ln1_rstd = block.take<A>(BT);
            a.qkv = block.take<S>(BT * 3 * C);
            a.att = fused_attention_ ? nullptr : block.take<S>(batch * H * time * time);
            a.att_lse = fused_attention_ ? block.take<float>(batch * H * time) : nullptr;
            a.atty = block.take<S>(BT * C);
            a.x_mid = block.take<S>(BT * C);
            a.ln2 = block.take<S>(BT * C);
            a.ln2_mean = block.take<A>(BT);
            a.ln2_rstd = block.take<A>(BT);
            a.fc = block.take<S>(BT * 4 * C);
            a.fc_gelu = block.take<S>(BT * 4 * C);
            a.x_out = block.take<S>(BT * C);
            a.lora_u_qkv = rank ? block.take<S>(BT * rank) : nullptr;
            a.lora_u_proj = rank ? block.take<S>(BT * rank) : nullptr;
        }
        lnf_ = block.take<S>(BT * C);
        lnf_mean_ = block.take<A>(BT);
        lnf_rstd_ = block.take<A>(BT);
        logits_ = block.take<S>(BT * padded_vocab());
        lse_ = block.take<A>(BT);
        loss_ = block.take<A>(1);
        d_res_ = block.take<S>(BT * C);
        d_a_ = block.take<S>(BT * C);
        d_b_ = block.take<S>(BT * C);
        d_qkv_ = block.take<S>(BT * 3 * C);
        d_fc_ = block.take<S>(BT * 4 * C);
        d_lora_u_ = rank ? block.take<S>(BT * rank) : nullptr;
    });
    batch_ = batch;
    time_ = time;
}

template <class S>
float GptCuda<S>::forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch,
                          std::int64_t time) {
    for (std::int64_t i = 0; i < batch * time; ++i)
        LEVERS_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size, "token {} at {} is outside the vocabulary",
                     tokens[i], i);
    // Checked here as the CPU op checks them: the card's kernels cannot throw.
    if (targets) kernels::counted_targets(targets, batch * time, config_.vocab_size);
    ensure_activations(batch, time);
    const auto s = card_stream();
    const std::int64_t B = batch, Tm = time, BT = B * Tm, C = config_.n_embd, H = config_.n_head,
                       V = config_.vocab_size;
    weights_.refresh();
    lora_weights_.refresh();
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(tokens_, tokens, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, s));
    has_targets_ = targets != nullptr;
    if (has_targets_)
        LEVERS_CUDA_CHECK(cudaMemcpyAsync(targets_, targets, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, s));
    cu::embedding_forward(x0_, tokens_, P(wte_), P(wpe_), B, Tm, C, s);
    const S* x = x0_;
    for (std::size_t l = 0; l < acts_.size(); ++l) {
        const auto& id = layer_ids_[l];
        Acts& a = acts_[l];
        cu::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, P(id[LN1_W]), P(id[LN1_B]), BT, C, s);
        cu::linear_forward(a.qkv, a.ln1, P(id[QKV_W]), P(id[QKV_B]), BT, C, 3 * C, s);
        if (lora_.rank)
            cu::lora_forward(a.qkv, a.lora_u_qkv, a.ln1, LP(l, QKV_A), LP(l, QKV_LB), BT, C, 3 * C, lora_.rank,
                             lora_.scale, s);
        if constexpr (std::is_same_v<S, cu::bf16>)
            if (fused_attention_) cu::attention_fused_forward(a.atty, a.att_lse, a.qkv, B, Tm, C, H, s);
        if (!fused_attention_) cu::attention_forward(a.atty, a.att, a.qkv, B, Tm, C, H, s);
        cu::linear_forward(a.x_mid, a.atty, P(id[PROJ_W]), P(id[PROJ_B]), BT, C, C, s);
        if (lora_.rank)
            cu::lora_forward(a.x_mid, a.lora_u_proj, a.atty, LP(l, PROJ_A), LP(l, PROJ_LB), BT, C, C, lora_.rank,
                             lora_.scale, s);
        cu::residual_forward(a.x_mid, x, a.x_mid, BT * C, s);
        cu::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.x_mid, P(id[LN2_W]), P(id[LN2_B]), BT, C, s);
        cu::linear_gelu_forward(a.fc_gelu, a.fc, a.ln2, P(id[FC_W]), P(id[FC_B]), BT, C, 4 * C, s);
        cu::linear_forward(a.x_out, a.fc_gelu, P(id[FCP_W]), P(id[FCP_B]), BT, 4 * C, C, s);
        cu::residual_forward(a.x_out, a.x_mid, a.x_out, BT * C, s);
        x = a.x_out;
    }
    cu::layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, P(lnf_w_), P(lnf_b_), BT, C, s);
    const std::int64_t Vp = padded_vocab();
    cu::linear_forward(logits_, lnf_, P(wte_), static_cast<const S*>(nullptr), BT, C, V, s, Vp);  // tied output
    if (!has_targets_) return 0;  // sampling: host_logits() fetches them
    cu::cross_entropy_forward(loss_, lse_, logits_, targets_, BT, V, s, -100, Vp);
    A loss = 0;
    device_copy(&loss, loss_, sizeof loss);  // waits for the stream
    return static_cast<float>(loss);
}

template <class S> void GptCuda<S>::backward() {
    LEVERS_CHECK(batch_ > 0 && has_targets_, "GPT backward() needs a forward() with targets first");
    has_targets_ = false;  // the logits are overwritten by their gradient below
    const auto s = card_stream();
    const std::int64_t B = batch_, Tm = time_, BT = B * Tm, C = config_.n_embd, H = config_.n_head,
                       V = config_.vocab_size;
    S* d_logits = logits_;  // in place
    const bool frozen = lora_.rank > 0;  // with LoRA only the adapters learn
    auto G = [&](int id) { return frozen ? static_cast<S*>(nullptr) : weights_.grad(id); };
    const std::int64_t Vp = padded_vocab();
    cu::cross_entropy_backward(d_logits, lse_, logits_, targets_, A(1), BT, V, s, -100, Vp);
    cu::linear_backward(d_a_, G(wte_), static_cast<S*>(nullptr), d_logits, lnf_, P(wte_), BT, C, V, s, Vp);
    cu::layernorm_backward(d_res_, G(lnf_w_), G(lnf_b_), d_a_, acts_.back().x_out, lnf_mean_, lnf_rstd_, P(lnf_w_),
                           BT, C, s);
    for (std::size_t l = acts_.size(); l-- > 0;) {
        const auto& id = layer_ids_[l];
        const Acts& a = acts_[l];
        const S* x_in = l == 0 ? x0_ : acts_[l - 1].x_out;
        cu::linear_gelu_backward(d_fc_, G(id[FCP_W]), G(id[FCP_B]), d_res_, a.fc_gelu, a.fc, P(id[FCP_W]), BT, 4 * C,
                                 C, s);
        cu::linear_backward(d_a_, G(id[FC_W]), G(id[FC_B]), d_fc_, a.ln2, P(id[FC_W]), BT, C, 4 * C, s);
        cu::layernorm_backward(d_b_, G(id[LN2_W]), G(id[LN2_B]), d_a_, a.x_mid, a.ln2_mean, a.ln2_rstd, P(id[LN2_W]),
                               BT, C, s);
        cu::residual_forward(d_res_, d_res_, d_b_, BT * C, s);
        cu::linear_backward(d_a_, G(id[PROJ_W]), G(id[PROJ_B]), d_res_, a.atty, P(id[PROJ_W]), BT, C, C, s);
        if (frozen)
            cu::lora_backward(d_a_, LG(l, PROJ_A), LG(l, PROJ_LB), d_lora_u_, d_res_, a.atty, a.lora_u_proj,
                              LP(l, PROJ_A), LP(l, PROJ_LB), BT, C, C, lora_.rank, lora_.scale, s);
        if constexpr (std::is_same_v<S, cu::bf16>)
            if (fused_attention_) cu::attention_fused_backward(d_qkv_, d_a_, a.atty, a.att_lse, a.qkv, B, Tm, C, H, s);
        if (!fused_attention_) cu::attention_backward(d_qkv_, d_a_, a.att, a.qkv, B, Tm, C, H, s);
        cu::linear_backward(d_a_, G(id[QKV_W]), G(id[QKV_B]), d_qkv_, a.ln1, P(id[QKV_W]), BT, C, 3 * C, s);
        if (frozen)
            cu::lora_backward(d_a_, LG(l, QKV_A), LG(l, QKV_LB), d_lora_u_, d_qkv_, a.ln1, a.lora_u_qkv, LP(l, QKV_A),
                              LP(l, QKV_LB), BT, C, 3 * C, lora_.rank, lora_.scale, s);
        cu::layernorm_backward(d_b_, G(id[LN1_W]), G(id[LN1_B]), d_a_, x_in, a.ln1_mean, a.ln1_rstd, P(id[LN1_W]), BT,
                               C, s);
        cu::residual_forward(d_res_, d_res_, d_b_, BT * C, s);
        // Layers l.. (and ln_f) are done; wte, first in the buffer, waits for the embedding.
        const auto& finals = frozen ? *lora_.params : params_;
        const int first = frozen ? lora_.ids[l][QKV_A] : id[LN1_W];
        finals.grads_final_from(finals.entries()[static_cast<std::size_t>(first)].offset);
    }
    if (!frozen) cu::embedding_backward(G(wte_), G(wpe_), d_res_, tokens_, B, Tm, C, s);
}

template <class S> const float* GptCuda<S>::host_logits() const {
    copy_to_host(host_logits_, logits_, static_cast<std::size_t>(batch_ * time_),
                 static_cast<std::size_t>(config_.vocab_size), static_cast<std::size_t>(padded_vocab()));
    return host_logits_.data();
}

}  // namespace

bool fused_attention(const GptConfig& config, DType compute) {
    const char* fused = std::getenv("LEVERS_FUSED_ATTENTION");
    return compute == DType::bf16 && cu::attention_fused_supported(config.n_embd, config.n_head) &&
           !(fused && std::string(fused) == "0");
}

std::shared_ptr<GptCard> make_gpt_card(const GptConfig& config, ParamSet<float>& params, GptCard::Lora lora,
                                       DType compute) {
    LEVERS_CHECK(params.grad_dtype() == compute && (!lora.params || lora.params->grad_dtype() == compute),
                 "a GPT computing in {} needs its gradients in {}", name_of(compute), name_of(compute));
    if (compute == DType::bf16) return std::make_shared<GptCuda<cu::bf16>>(config, params, std::move(lora));
    LEVERS_CHECK(compute == DType::f32, "a GPT on a card computes in f32 or bf16, not {}", name_of(compute));
    return std::make_shared<GptCuda<float>>(config, params, std::move(lora));
}

}  // namespace levers::models
