#include "models/gpt_cuda.hpp"

#include "framework/core/cuda_check.hpp"
#include "framework/core/error.hpp"
#include "kernels/cuda/ops.hpp"

#include <algorithm>

namespace levers::models {

namespace cu = kernels::cuda;

namespace {
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }
// The 12 parameter names of a block, in the CPU model's order.
const char* kLayerParams[] = {"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                              "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                              "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"};
enum { LN1_W, LN1_B, QKV_W, QKV_B, PROJ_W, PROJ_B, LN2_W, LN2_B, FC_W, FC_B, FCP_W, FCP_B };
}  // namespace

GptCuda::GptCuda(const Gpt<float>& host) : config_(host.config()), entries_(host.params().entries()) {
    size_ = host.params().size();
    auto id_of = [&](const std::string& name) {
        for (std::size_t i = 0; i < entries_.size(); ++i)
            if (entries_[i].name == name) return static_cast<int>(i);
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
    cudaStream_t s = nullptr;
    LEVERS_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    stream_ = s;
    const std::size_t bytes = static_cast<std::size_t>(size_) * sizeof(float);
    for (float** buf : {&params_, &grads_, &m_, &v_}) {
        LEVERS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(buf), bytes));
        LEVERS_CUDA_CHECK(cudaMemsetAsync(*buf, 0, bytes, s));
    }
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(params_, host.params().params().data<float>(), bytes, cudaMemcpyHostToDevice, s));
    LEVERS_CUDA_CHECK(cudaStreamSynchronize(s));
}

GptCuda::~GptCuda() {
    for (void* p : {static_cast<void*>(params_), static_cast<void*>(grads_), static_cast<void*>(m_),
                    static_cast<void*>(v_), static_cast<void*>(block_)})
        if (p) cudaFree(p);
    if (stream_) cudaStreamDestroy(as_stream(stream_));
}

float* GptCuda::P(int id) const { return params_ + entries_[static_cast<std::size_t>(id)].offset; }
float* GptCuda::G(int id) const { return grads_ + entries_[static_cast<std::size_t>(id)].offset; }

float* GptCuda::take(std::int64_t elems) {
    // 256-byte aligned pieces of the block (sized by a first, counting pass).
    const std::size_t bytes = (static_cast<std::size_t>(elems) * sizeof(float) + 255) / 256 * 256;
    float* p = block_ ? reinterpret_cast<float*>(block_ + used_) : nullptr;
    used_ += bytes;
    return p;
}

void GptCuda::ensure_activations(std::int64_t batch, std::int64_t time) {
    if (batch == batch_ && time == time_) return;
    const std::int64_t BT = batch * time, C = config_.n_embd, H = config_.n_head, V = config_.vocab_size;
    for (int pass = 0; pass < 2; ++pass) {  // the first pass only counts bytes
        used_ = 0;
        tokens_ = reinterpret_cast<std::int32_t*>(take(BT));
        targets_ = reinterpret_cast<std::int32_t*>(take(BT));
        x0_ = take(BT * C);
        acts_.assign(static_cast<std::size_t>(config_.n_layer), Acts{});
        for (Acts& a : acts_) {
            a.ln1 = take(BT * C);
            a.ln1_mean = take(BT);
            a.ln1_rstd = take(BT);
            a.qkv = take(BT * 3 * C);
            a.att = take(batch * H * time * time);
            a.atty = take(BT * C);
            a.x_mid = take(BT * C);
            a.ln2 = take(BT * C);
            a.ln2_mean = take(BT);
            a.ln2_rstd = take(BT);
            a.fc = take(BT * 4 * C);
            a.fc_gelu = take(BT * 4 * C);
            a.x_out = take(BT * C);
        }
        lnf_ = take(BT * C);
        lnf_mean_ = take(BT);
        lnf_rstd_ = take(BT);
        logits_ = take(BT * V);
        lse_ = take(BT);
        loss_ = take(1);
        d_res_ = take(BT * C);
        d_a_ = take(BT * C);
        d_b_ = take(BT * C);
        d_qkv_ = take(BT * 3 * C);
        d_fc_ = take(BT * 4 * C);
        if (pass == 0) {
            if (block_) LEVERS_CUDA_CHECK(cudaFree(block_));
            LEVERS_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&block_), used_));
        }
    }
    batch_ = batch;
    time_ = time;
}

float GptCuda::forward(const std::int32_t* tokens, const std::int32_t* targets, std::int64_t batch,
                       std::int64_t time) {
    LEVERS_CHECK(batch >= 1 && time >= 1 && time <= config_.block_size,
                 "GPT forward needs batch >= 1 and 1 <= time <= block_size ({}), got batch {} time {}",
                 config_.block_size, batch, time);
    for (std::int64_t i = 0; i < batch * time; ++i)
        LEVERS_CHECK(tokens[i] >= 0 && tokens[i] < config_.vocab_size, "token {} at {} is outside the vocabulary",
                     tokens[i], i);
    ensure_activations(batch, time);
    const auto s = as_stream(stream_);
    const std::int64_t B = batch, Tm = time, BT = B * Tm, C = config_.n_embd, H = config_.n_head,
                       V = config_.vocab_size;
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(tokens_, tokens, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, s));
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(targets_, targets, BT * sizeof(std::int32_t), cudaMemcpyHostToDevice, s));
    cu::embedding_forward(x0_, tokens_, P(wte_), P(wpe_), B, Tm, C, s);
    const float* x = x0_;
    for (std::size_t l = 0; l < acts_.size(); ++l) {
        const auto& id = layer_ids_[l];
        Acts& a = acts_[l];
        cu::layernorm_forward(a.ln1, a.ln1_mean, a.ln1_rstd, x, P(id[LN1_W]), P(id[LN1_B]), BT, C, s);
        cu::linear_forward(a.qkv, a.ln1, P(id[QKV_W]), P(id[QKV_B]), BT, C, 3 * C, s);
        cu::attention_forward(a.atty, a.att, a.qkv, B, Tm, C, H, s);
        cu::linear_forward(a.x_mid, a.atty, P(id[PROJ_W]), P(id[PROJ_B]), BT, C, C, s);
        cu::residual_forward(a.x_mid, x, a.x_mid, BT * C, s);
        cu::layernorm_forward(a.ln2, a.ln2_mean, a.ln2_rstd, a.x_mid, P(id[LN2_W]), P(id[LN2_B]), BT, C, s);
        cu::linear_forward(a.fc, a.ln2, P(id[FC_W]), P(id[FC_B]), BT, C, 4 * C, s);
        cu::gelu_forward(a.fc_gelu, a.fc, BT * 4 * C, s);
        cu::linear_forward(a.x_out, a.fc_gelu, P(id[FCP_W]), P(id[FCP_B]), BT, 4 * C, C, s);
        cu::residual_forward(a.x_out, a.x_mid, a.x_out, BT * C, s);
        x = a.x_out;
    }
    cu::layernorm_forward(lnf_, lnf_mean_, lnf_rstd_, x, P(lnf_w_), P(lnf_b_), BT, C, s);
    cu::linear_forward(logits_, lnf_, P(wte_), static_cast<const float*>(nullptr), BT, C, V, s);  // tied output
    cu::cross_entropy_forward(loss_, lse_, logits_, targets_, BT, V, s);
    float loss = 0;
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(&loss, loss_, sizeof(float), cudaMemcpyDeviceToHost, s));
    LEVERS_CUDA_CHECK(cudaStreamSynchronize(s));
    return loss;
}

void GptCuda::backward() {
    LEVERS_CHECK(batch_ > 0, "GPT backward() needs a forward() first");
    const auto s = as_stream(stream_);
    const std::int64_t B = batch_, Tm = time_, BT = B * Tm, C = config_.n_embd, H = config_.n_head,
                       V = config_.vocab_size;
    float* d_logits = logits_;  // in place
    cu::cross_entropy_backward(d_logits, lse_, logits_, targets_, 1.0f, BT, V, s);
    cu::linear_backward(d_a_, G(wte_), static_cast<float*>(nullptr), d_logits, lnf_, P(wte_), BT, C, V, s);
    cu::layernorm_backward(d_res_, G(lnf_w_), G(lnf_b_), d_a_, acts_.back().x_out, lnf_mean_, lnf_rstd_, P(lnf_w_),
                           BT, C, s);
    for (std::size_t l = acts_.size(); l-- > 0;) {
        const auto& id = layer_ids_[l];
        const Acts& a = acts_[l];
        const float* x_in = l == 0 ? x0_ : acts_[l - 1].x_out;
        cu::linear_backward(d_fc_, G(id[FCP_W]), G(id[FCP_B]), d_res_, a.fc_gelu, P(id[FCP_W]), BT, 4 * C, C, s);
        cu::gelu_backward(d_fc_, d_fc_, a.fc, BT * 4 * C, s);
        cu::linear_backward(d_a_, G(id[FC_W]), G(id[FC_B]), d_fc_, a.ln2, P(id[FC_W]), BT, C, 4 * C, s);
        cu::layernorm_backward(d_b_, G(id[LN2_W]), G(id[LN2_B]), d_a_, a.x_mid, a.ln2_mean, a.ln2_rstd, P(id[LN2_W]),
                               BT, C, s);
        cu::residual_forward(d_res_, d_res_, d_b_, BT * C, s);
        cu::linear_backward(d_a_, G(id[PROJ_W]), G(id[PROJ_B]), d_res_, a.atty, P(id[PROJ_W]), BT, C, C, s);
        cu::attention_backward(d_qkv_, d_a_, a.att, a.qkv, B, Tm, C, H, s);
        cu::linear_backward(d_a_, G(id[QKV_W]), G(id[QKV_B]), d_qkv_, a.ln1, P(id[QKV_W]), BT, C, 3 * C, s);
        cu::layernorm_backward(d_b_, G(id[LN1_W]), G(id[LN1_B]), d_a_, x_in, a.ln1_mean, a.ln1_rstd, P(id[LN1_W]), BT,
                               C, s);
        cu::residual_forward(d_res_, d_res_, d_b_, BT * C, s);
    }
    cu::embedding_backward(G(wte_), G(wpe_), d_res_, tokens_, B, Tm, C, s);
}

void GptCuda::zero_grad() {
    LEVERS_CUDA_CHECK(cudaMemsetAsync(grads_, 0, static_cast<std::size_t>(size_) * sizeof(float), as_stream(stream_)));
}

double GptCuda::clip_grad_norm(double max_norm) { return cu::clip_grad_norm(grads_, size_, max_norm, as_stream(stream_)); }

void GptCuda::adamw_step(const kernels::AdamWHyper& hyper, double lr) {
    ++steps_;
    kernels::AdamWHyper h = hyper;
    h.lr = lr;
    for (const auto& e : entries_) {
        h.weight_decay = e.decay ? hyper.weight_decay : 0.0;
        cu::adamw_step(params_ + e.offset, m_ + e.offset, v_ + e.offset, grads_ + e.offset, e.shape.numel(), h, steps_,
                       as_stream(stream_));
    }
}

void GptCuda::synchronize() const { LEVERS_CUDA_CHECK(cudaStreamSynchronize(as_stream(stream_))); }

std::vector<float> GptCuda::to_host(const float* device) const {
    std::vector<float> out(static_cast<std::size_t>(size_));
    LEVERS_CUDA_CHECK(cudaMemcpyAsync(out.data(), device, out.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                      as_stream(stream_)));
    synchronize();
    return out;
}

std::vector<float> GptCuda::parameters() const { return to_host(params_); }
std::vector<float> GptCuda::gradients() const { return to_host(grads_); }

}  // namespace levers::models
