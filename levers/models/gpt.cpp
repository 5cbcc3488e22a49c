#include "levers/models/gpt.hpp"

#include "levers/core/device_memory.hpp"
#include "levers/core/storage_pool.hpp"
#include "levers/kernels/embedding.hpp"
#include "levers/kernels/linear_cross_entropy.hpp"
#include "levers/kernels/linear_gelu.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/nn/checkpoint.hpp"
#include "levers/nn/lora.hpp"

#include <cstring>

namespace levers::models {

namespace {
const GptConfig& checked(const GptConfig& c) {
    c.validate();
    return c;
}
constexpr double kStd = 0.02;  // GPT-2's initialisation
}  // namespace

void GptConfig::validate() const {
    LEVERS_CHECK(vocab_size >= 2, "vocab_size must be >= 2, got {}", vocab_size);
    LEVERS_CHECK(block_size >= 1, "block_size must be >= 1, got {}", block_size);
    LEVERS_CHECK(n_layer >= 1, "n_layer must be >= 1, got {}", n_layer);
    LEVERS_CHECK(n_head >= 1 && n_embd >= 1 && n_embd % n_head == 0,
                 "n_embd ({}) must be a positive multiple of n_head ({})", n_embd, n_head);
    LEVERS_CHECK(dropout >= 0 && dropout < 1, "dropout must be in [0, 1), got {}", dropout);
}

std::int64_t GptConfig::parameter_count() const {
    std::int64_t c = n_embd;
    std::int64_t per_layer = 2 * c + (3 * c * c + 3 * c) + (c * c + c) + 2 * c + (4 * c * c + 4 * c) + (4 * c * c + c);
    return std::int64_t{vocab_size} * c + std::int64_t{block_size} * c + n_layer * per_layer + 2 * c;
}

GptMlp::GptMlp(Module& parent, std::string name, std::int64_t channels, int layers)
    : c_fc(*this, "c_fc", channels, 4 * channels, true, nn::init::normal(kStd)),
      c_proj(*this, "c_proj", 4 * channels, channels, true, nn::init::gpt2_residual(kStd, layers)) {
    parent.register_module(std::move(name), *this);
}

Tensor GptMlp::forward(const Tensor& x) {
    if (c_fc.has_lora() || c_proj.has_lora()) return c_proj(ops::gelu(c_fc(x)));
    return ops::gelu_mlp(x, c_fc.weight(), (*c_fc.bias)(), c_proj.weight(), (*c_proj.bias)());
}

GptBlock::GptBlock(const GptConfig& c)
    : ln_1(*this, "ln_1", c.n_embd),
      attn(*this, "attn", c.n_embd, c.n_head, nn::init::gpt2_residual(kStd, c.n_layer), nn::init::normal(kStd)),
      ln_2(*this, "ln_2", c.n_embd),
      mlp(*this, "mlp", c.n_embd, c.n_layer),
      drop(*this, "drop", c.dropout) {}

Tensor GptBlock::forward(const Tensor& x) {
    const Tensor mid = x + drop(attn(ln_1(x)));
    return mid + drop(mlp(ln_2(mid)));
}

Gpt::Gpt(const GptConfig& config, std::uint64_t seed)
    : wte(*this, "wte", checked(config).vocab_size, config.n_embd, nn::init::normal(kStd)),
      wpe(*this, "wpe", config.block_size, config.n_embd, nn::init::normal(kStd)),
      h(*this, "h", config.n_layer, config),
      ln_f(*this, "ln_f", config.n_embd),
      drop(*this, "drop", config.dropout),
      config_(config) {
    initialize(seed);
}

void Gpt::check_tokens(const Tensor& tokens) const {
    LEVERS_CHECK(tokens.shape().ndim() == 2 && tokens.dim(0) >= 1 && tokens.dim(1) >= 1 &&
                     tokens.dim(1) <= config_.block_size,
                 "GPT forward needs tokens [batch >= 1, 1 <= time <= block_size ({})], got {}", config_.block_size,
                 tokens.shape().str());
}

Tensor Gpt::features(const Tensor& tokens) {
    check_tokens(tokens);
    Tensor x = drop(ops::embedding(tokens, wte.weight(), wpe.weight()));
    for (GptBlock& block : h)
        x = checkpoint_blocks_ ? nn::checkpoint(block, x, [&block](const Tensor& in) { return block(in); }) : block(x);
    return ln_f(x);
}

Tensor Gpt::logits(const Tensor& tokens) { return ops::linear(features(tokens), wte.weight()); }

Tensor Gpt::loss(const Tensor& tokens, const Tensor& targets) {
    LEVERS_CHECK(targets.shape() == tokens.shape(), "GPT loss: targets {} do not match tokens {}",
                 targets.shape().str(), tokens.shape().str());
    return ops::linear_cross_entropy(features(tokens), wte.weight(), targets);
}

Tensor Gpt::next_logits(const Tensor& tokens) {
    const Tensor f = features(tokens);
    const std::int64_t batch = f.dim(0), time = f.dim(1), channels = f.dim(2);
    if (batch == 1) return ops::linear(f.view({time, channels}).slice(time - 1, time), wte.weight());
    // Each row's last position: the whole logits, then those rows (sampling runs one row).
    const Tensor all = ops::linear(f, wte.weight()).to(Device::cpu());
    Tensor out = Tensor::empty({batch, config_.vocab_size}, all.dtype());
    const auto width = static_cast<std::int64_t>(size_of(all.dtype())) * config_.vocab_size;
    for (std::int64_t b = 0; b < batch; ++b)
        std::memcpy(static_cast<std::byte*>(out.raw()) + b * width,
                    static_cast<const std::byte*>(all.raw()) + ((b + 1) * time - 1) * width, static_cast<std::size_t>(width));
    return out;
}

std::string Gpt::summary() const {
    return fmt::format("GPT, {} layers x {}, {} heads, context {}", config_.n_layer, config_.n_embd, config_.n_head,
                       config_.block_size);
}

namespace {
class GptDecoder : public LanguageModel::Decoder {
public:
    explicit GptDecoder(Gpt& model) : model_(model) {}
    Tensor next(const std::vector<std::int32_t>& tokens) override {
        seen_.insert(seen_.end(), tokens.begin(), tokens.end());
        const std::int64_t t = std::min<std::int64_t>(static_cast<std::int64_t>(seen_.size()), model_.context_length());
        const std::vector<std::int32_t> window(seen_.end() - t, seen_.end());
        return model_.next_logits(Tensor::from(window, {1, t})).to(Device::cpu(), DType::f32).reshape({-1});
    }

private:
    Gpt& model_;
    std::vector<std::int32_t> seen_;
};
}  // namespace

std::unique_ptr<LanguageModel::Decoder> Gpt::decoder(std::int64_t) { return std::make_unique<GptDecoder>(*this); }

void Gpt::enable_lora(int rank, double alpha, std::uint64_t seed) {
    nn::attach_lora(*this, rank, alpha, seed, {"attn.c_attn", "attn.c_proj"});
}

std::vector<std::pair<std::string, nn::Parameter*>> Gpt::weights() {
    std::vector<std::pair<std::string, nn::Parameter*>> out;
    for (const auto& [name, p] : named_parameters())
        if (p->name() != "lora_a" && p->name() != "lora_b") out.emplace_back(name, p);
    return out;
}

bool Gpt::has_lora() { return nn::has_lora(*this); }
void Gpt::merge_lora() { nn::merge_lora(*this); }

std::size_t Gpt::activation_bytes() {
    return device().is_cpu() ? cpu_pool().stats().peak : device_memory_stats().peak;
}

}  // namespace levers::models
