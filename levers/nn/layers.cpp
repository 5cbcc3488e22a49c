#include "levers/nn/layers.hpp"

#include "levers/kernels/dropout.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/embedding.hpp"
#include "levers/kernels/gelu.hpp"
#include "levers/kernels/layernorm.hpp"
#include "levers/kernels/lora.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/kernels/rmsnorm.hpp"

#include <nlohmann/json.hpp>

#include <functional>

namespace levers::nn {

Linear::Linear(std::int64_t in, std::int64_t out, bool with_bias, Init weight_init)
    : weight(param("weight", {out, in}, weight_init)), bias(with_bias ? &param("bias", {out}, init::zeros()) : nullptr) {}

Linear::Linear(Module& parent, std::string name, std::int64_t in, std::int64_t out, bool with_bias, Init weight_init)
    : Linear(in, out, with_bias, weight_init) {
    parent.register_module(std::move(name), *this);
}

Tensor Linear::forward(const Tensor& x) {
    const Tensor b = bias ? (*bias)() : Tensor();
    if (weight.held_in_4bit()) {
        LEVERS_CHECK(weight.quantized() != nullptr, "'{}' is held in 4 bits but was never given its values",
                     weight.full_name());
        if (lora_a_ && lora_enabled_)
            return ops::lora_linear_4bit(x, weight.quantized(), b, (*lora_a_)(), (*lora_b_)(), lora_scale_);
        return ops::linear_4bit(x, weight.quantized(), b);
    }
    if (lora_a_ && lora_enabled_) return ops::lora_linear(x, weight(), b, (*lora_a_)(), (*lora_b_)(), lora_scale_);
    return ops::linear(x, weight(), b);
}

void Linear::attach_lora(int rank, double alpha) {
    LEVERS_CHECK(!lora_a_, "'{}' already has a LoRA adapter", full_name());
    LEVERS_CHECK(rank >= 1 && rank <= std::min(in_features(), out_features()),
                 "lora rank must be in 1..{} for '{}' ({} -> {}), got {}", std::min(in_features(), out_features()),
                 full_name(), in_features(), out_features(), rank);
    LEVERS_CHECK(alpha > 0, "lora alpha must be positive, got {}", alpha);
    // A as PEFT's Kaiming-uniform default for nn.Linear; B = 0, so the adapted layer starts as the frozen one.
    lora_a_ = &param("lora_a", {rank, in_features()}, init::fan_in_uniform());
    lora_b_ = &param("lora_b", {out_features(), rank}, init::zeros());
    lora_scale_ = alpha / rank;
}

std::unique_ptr<Linear> optional_linear(Module& parent, bool wanted, std::string name, std::int64_t in,
                                        std::int64_t out, bool bias, Init weight_init) {
    return wanted ? std::make_unique<Linear>(parent, std::move(name), in, out, bias, weight_init) : nullptr;
}

void Linear::merge_lora() {
    LEVERS_CHECK(lora_a_, "merge_lora(): '{}' has no LoRA adapter", full_name());
    if (weight.held_in_4bit()) weight.dequantize();  // the merged weight is full precision
    // On the host (once per run: a copy there and back is cheap next to training), in f32 or f64 (a frozen
    // weight held in bf16 on a GPU is summed in f32, then rounded once).
    const DType dtype = weight.value().dtype() == DType::f64 ? DType::f64 : DType::f32;
    Tensor w = weight.value().to(Device::cpu(), dtype);
    const Tensor a = lora_a_->value().to(Device::cpu(), dtype), b = lora_b_->value().to(Device::cpu(), dtype);
    const auto rank = a.dim(0);
    if (dtype == DType::f64)
        kernels::cpu::lora_merge(w.data<double>(), a.data<double>(), b.data<double>(), in_features(), out_features(),
                                 rank, lora_scale_);
    else
        kernels::cpu::lora_merge(w.data<float>(), a.data<float>(), b.data<float>(), in_features(), out_features(), rank,
                                 static_cast<float>(lora_scale_));
    weight.value().copy_from(w.to(weight.value().dtype()));
    lora_b_->value().zero();
    root().parameters_changed();
}

Embedding::Embedding(std::int64_t count, std::int64_t dim, Init init) : weight(param("weight", {count, dim}, init)) {}

Embedding::Embedding(Module& parent, std::string name, std::int64_t count, std::int64_t dim, Init init)
    : Embedding(count, dim, init) {
    parent.register_module(std::move(name), *this);
}

Tensor Embedding::forward(const Tensor& tokens) { return ops::embedding(tokens, weight()); }

LayerNorm::LayerNorm(std::int64_t dim, double eps_)
    : weight(param("weight", {dim}, init::ones())), bias(param("bias", {dim}, init::zeros())), eps(eps_) {}

LayerNorm::LayerNorm(Module& parent, std::string name, std::int64_t dim, double eps_) : LayerNorm(dim, eps_) {
    parent.register_module(std::move(name), *this);
}

Tensor LayerNorm::forward(const Tensor& x) { return ops::layernorm(x, weight(), bias(), eps); }

RMSNorm::RMSNorm(std::int64_t dim, double eps_, double offset_)
    : weight(param("weight", {dim}, offset_ == 1 ? init::zeros() : init::ones())), eps(eps_), offset(offset_) {}

RMSNorm::RMSNorm(Module& parent, std::string name, std::int64_t dim, double eps_, double offset_)
    : RMSNorm(dim, eps_, offset_) {
    parent.register_module(std::move(name), *this);
}

// The fused kernel; its reference is x · rsqrt(mean(x², -1) + eps) · weight (tests/unit/kernels/test_fused_llama.cpp).
// An offset adds a vector op on the weight alone (dim values), not on x.
Tensor RMSNorm::forward(const Tensor& x) {
    return ops::rmsnorm(x, offset == 0 ? weight() : weight() + offset, eps);
}

Tensor GELU::forward(const Tensor& x) { return ops::gelu(x, form); }
Tensor ReLU::forward(const Tensor& x) { return ops::relu(x); }
Tensor SiLU::forward(const Tensor& x) { return ops::silu(x); }
Tensor Sigmoid::forward(const Tensor& x) { return ops::sigmoid(x); }
Tensor Tanh::forward(const Tensor& x) { return ops::tanh(x); }

Dropout::Dropout(double p_) : p(p_) {
    LEVERS_CHECK(p >= 0 && p < 1, "dropout p must be in [0, 1), got {}", p);
}

Dropout::Dropout(Module& parent, std::string name, double p_) : Dropout(p_) {
    parent.register_module(std::move(name), *this);
}

nlohmann::json Dropout::state() const { return {{"calls", calls_}}; }
void Dropout::set_state(const nlohmann::json& s) { calls_ = s.at("calls").get<std::uint64_t>(); }

Tensor Dropout::forward(const Tensor& x) {
    if (p == 0 || !training()) return x;
    using kernels::mix64;
    const std::uint64_t where = std::hash<std::string>{}(full_name());
    const std::uint64_t key = mix64(mix64(seed()) ^ mix64(stream() + 0x632be59bd9b4e019ull) ^ where) + calls_++;
    return ops::dropout(x, p, mix64(key));
}

}  // namespace levers::nn
