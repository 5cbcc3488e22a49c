// The basic layers. Each has a constructor that registers it under a parent
// (`Linear fc{*this, "fc", 784, 256}`) and one that makes it alone (for
// containers, or as a model of its own).
#pragma once

#include "levers/nn/module.hpp"
#include "levers/kernels/elementwise.hpp"

#include <cstdint>
#include <memory>
#include <optional>

namespace levers::nn {

// y = x · weightᵀ + bias, weight [out, in] (PyTorch's nn.Linear, its
// initialisation too: U(±1/√in) weights, zero bias here as GPT-2 and most
// recipes want). A LoRA adapter can be attached (lora.hpp).
class Linear : public Layer {
public:
    Linear(std::int64_t in, std::int64_t out, bool bias = true, Init weight_init = init::fan_in_uniform());
    Linear(Module& parent, std::string name, std::int64_t in, std::int64_t out, bool bias = true,
           Init weight_init = init::fan_in_uniform());
    Tensor forward(const Tensor& x) override;

    Parameter& weight;
    Parameter* bias = nullptr;
    std::int64_t in_features() const { return weight.shape()[1]; }
    std::int64_t out_features() const { return weight.shape()[0]; }

    // LoRA: out += scale · (x · Aᵀ) · Bᵀ, A [rank, in] ~ U(±1/√in), B [out, rank] = 0.
    void attach_lora(int rank, double alpha);
    bool has_lora() const { return lora_a_ != nullptr; }
    // The adapter's A [rank, in] and B [out, rank] and its scale (alpha / rank); null without one.
    Parameter* lora_a() const { return lora_a_; }
    Parameter* lora_b() const { return lora_b_; }
    double lora_scale() const { return lora_scale_; }
    // Whether the adapter takes part in forward (PEFT's disable_adapter: the
    // frozen layer alone, as a preference recipe's reference).
    void enable_lora(bool on) { lora_enabled_ = on; }
    bool lora_enabled() const { return lora_enabled_; }
    // W += scale · B · A, then B = 0: the same function without the adapter's part.
    void merge_lora();

private:
    Parameter* lora_a_ = nullptr;
    Parameter* lora_b_ = nullptr;
    double lora_scale_ = 0;
    bool lora_enabled_ = true;
};

// A Linear registered in `parent` as `name` where `wanted`, else none: a
// layer's projections that its options choose (Phi-3's fused ones in place
// of separate ones).
std::unique_ptr<Linear> optional_linear(Module& parent, bool wanted, std::string name, std::int64_t in,
                                        std::int64_t out, bool bias, Init weight_init);

// A lookup table: tokens (i32, any shape) to rows of weight [count, dim].
class Embedding : public Layer {
public:
    Embedding(std::int64_t count, std::int64_t dim, Init init = init::normal(1.0));
    Embedding(Module& parent, std::string name, std::int64_t count, std::int64_t dim, Init init = init::normal(1.0));
    Tensor forward(const Tensor& tokens) override;
    Parameter& weight;
};

// Normalises over the last dimension: weight (gain, starts at one) and bias.
class LayerNorm : public Layer {
public:
    explicit LayerNorm(std::int64_t dim, double eps = 1e-5);
    LayerNorm(Module& parent, std::string name, std::int64_t dim, double eps = 1e-5);
    Tensor forward(const Tensor& x) override;
    Parameter& weight;
    Parameter& bias;
    double eps;
};

// Normalises over the last dimension by the root mean square, then scales by
// weight (starts at one): x / √(mean(x²) + eps) · weight (Llama's RMSNorm).
// x · rsqrt(mean(x²) + eps) · (offset + weight). offset 0 (the Llama
// family's), the weight starting at one; offset 1 (Gemma's), at zero.
class RMSNorm : public Layer {
public:
    explicit RMSNorm(std::int64_t dim, double eps = 1e-6, double offset = 0);
    RMSNorm(Module& parent, std::string name, std::int64_t dim, double eps = 1e-6, double offset = 0);
    Tensor forward(const Tensor& x) override;
    Parameter& weight;
    double eps, offset;
};

// Activations, no parameters: each the op of the same name.
class GELU : public Layer {  // the tanh form unless GeluForm::erf
public:
    explicit GELU(ops::GeluForm form = ops::GeluForm::tanh) : form(form) {}
    GELU(Module& parent, std::string name, ops::GeluForm form = ops::GeluForm::tanh) : form(form) {
        parent.register_module(std::move(name), *this);
    }
    Tensor forward(const Tensor& x) override;
    ops::GeluForm form;
};
#define LEVERS_ACTIVATION(Name)                                                                  \
    class Name : public Layer {                                                                  \
    public:                                                                                      \
        Name() = default;                                                                        \
        Name(Module& parent, std::string name) { parent.register_module(std::move(name), *this); } \
        Tensor forward(const Tensor& x) override;                                                \
    };
LEVERS_ACTIVATION(ReLU)
LEVERS_ACTIVATION(SiLU)
LEVERS_ACTIVATION(Sigmoid)
LEVERS_ACTIVATION(Tanh)
#undef LEVERS_ACTIVATION

// Dimensions start..end (inclusive) as one, as Tensor::flatten: an image batch
// [N, C, H, W] becomes [N, C·H·W] with the defaults.
class Flatten : public Layer {
public:
    explicit Flatten(int start = 1, int end = -1) : start(start), end(end) {}
    Flatten(Module& parent, std::string name, int start = 1, int end = -1) : start(start), end(end) {
        parent.register_module(std::move(name), *this);
    }
    Tensor forward(const Tensor& x) override { return x.flatten(start, end); }
    int start, end;
};

// Zeroes each element with probability p while the model trains (scaling
// the rest by 1/(1-p)); the identity in evaluation. The mask is drawn from
// the model's seed, its random stream (each rank's), this layer's name and
// a count of its calls, which save_state() keeps for exact resumes.
class Dropout : public Layer {
public:
    explicit Dropout(double p);
    Dropout(Module& parent, std::string name, double p);
    Tensor forward(const Tensor& x) override;
    double p;

protected:
    nlohmann::json state() const override;
    void set_state(const nlohmann::json& s) override;

private:
    std::uint64_t calls_ = 0;
};

}  // namespace levers::nn
