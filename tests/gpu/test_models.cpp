// Whole models on the GPU against the same models on the CPU: the GPT (with
// and without LoRA adapters), the MLP and the Llama family in f32 to 1e-5, and in bf16 within
// what bf16 keeps (losses to 2%, each gradient tensor's direction to 5%).
// Skipped, and counted as skipped, where no GPU is present.
#include "levers/core/error.hpp"
#include "levers/core/gpu.hpp"
#include "levers/train/optimizer.hpp"
#include "levers/train/param_kernels.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/gpt.hpp"
#include "levers/models/llama.hpp"
#include "levers/models/mlp.hpp"
#include "tests/gpu/no_gpu.hpp"
#include "tests/gpu/gpu_values.hpp"

#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <utility>

using namespace levers;
using namespace levers::testing;

namespace {

constexpr double kF32 = Precision<float>::values;

// A tensor's values on the host as f32 (bf16 widened).
std::vector<float> host(const Tensor& t) {
    const std::vector<double> v = t.values();
    return std::vector<float>(v.begin(), v.end());
}

struct Tokens {
    Tensor tokens, targets;
};
Tokens tokens_for(std::int64_t batch, std::int64_t time, int vocab, std::int32_t ignored_at = -1) {
    std::vector<std::int32_t> x(static_cast<std::size_t>(batch * time)), y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = static_cast<std::int32_t>((i * 7 + 3) % vocab);
        y[i] = static_cast<std::int32_t>((i * 11 + 5) % vocab);
    }
    if (ignored_at >= 0) y[static_cast<std::size_t>(ignored_at)] = -100;
    return {Tensor::from(x, {batch, time}), Tensor::from(y, {batch, time})};
}

// Zeroes both models' gradients, runs a loss and backward on each, and
// returns both losses and both models' gradients as f32.
template <class Model, class Loss>
std::pair<std::vector<float>, std::vector<float>> both_gradients(Model& cpu_model, Model& gpu_model, Loss&& loss,
                                                                 double& cpu_loss, double& gpu_loss) {
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    const Tensor lc = loss(cpu_model), lg = loss(gpu_model);
    lc.backward();
    lg.backward();
    cpu_loss = lc.item();
    gpu_loss = lg.item();
    return {host(cpu_model.params().grads()), host(gpu_model.params().grads())};
}

}  // namespace

TEST_CASE("the whole GPT on the GPU matches the CPU: loss, every gradient, clipping and one AdamW step" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    models::GptConfig config{.vocab_size = 97, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32};
    models::Gpt cpu_model(config, 31), gpu_model(config, 31);  // the same seed: the same weights
    gpu_model.to(Device::cuda(0));
    REQUIRE(gpu_model.device() == Device::cuda(0));
    const Tokens t = tokens_for(3, 16, 97, 4);  // an ignored position
    auto loss = [&](models::Gpt& m) { return m.loss(t.tokens, t.targets); };
    double cpu_loss = 0, gpu_loss = 0;
    const auto [want, got] = both_gradients(cpu_model, gpu_model, loss, cpu_loss, gpu_loss);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-5));
    check_close("GPT gradients", want, got, kF32);
    CHECK(train::clip_grad_norm(gpu_model.params(), 0.5) ==
          doctest::Approx(train::clip_grad_norm(cpu_model.params(), 0.5)).epsilon(1e-5));

    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    train::AdamW cpu_opt(cpu_model.params(), h), gpu_opt(gpu_model.params(), h);
    cpu_opt.step(1e-3);
    gpu_opt.step(1e-3);
    check_close("GPT parameters after a step", host(cpu_model.params().params()), host(gpu_model.params().params()),
                kF32);
    check_close("AdamW second moments", host(cpu_opt.second_moment()), host(gpu_opt.second_moment()), kF32);

    // Sampling reads the logits on the host.
    {
        autograd::InferenceMode inference;
        const Tensor one = t.tokens.slice(0, 1);
        check_close("GPT logits without targets", host(cpu_model.logits(one)), host(gpu_model.logits(one)), kF32);
        check_close("the last position's logits", host(cpu_model.next_logits(one)), host(gpu_model.next_logits(one)),
                    kF32);
    }

    // A target outside the vocabulary is refused on the GPU as on the CPU.
    std::vector<std::int32_t> bad(48, 1);
    bad[7] = 97;
    const Tensor bad_targets = Tensor::from(bad, {3, 16});
    for (auto* m : {&cpu_model, &gpu_model})
        CHECK_THROWS_WITH_AS(m->loss(t.tokens, bad_targets),
                             doctest::Contains("target 97 in row 7 is outside [0, 97)"), Error);
}

namespace {
// A GPT with LoRA adapters on the GPU, computing in `compute`, against the
// same on the CPU in f32: the adapters' gradients, a frozen base, the merge.
void check_lora(DType compute) {
    models::GptConfig config{.vocab_size = 61, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
    models::Gpt cpu_model(config, 5), gpu_model(config, 5);
    for (auto* m : {&cpu_model, &gpu_model}) m->enable_lora(4, 8.0, 9);
    // Non-zero B (A random too), so the adapters change the function; the same on both.
    const Tensor adapters = Tensor::from(random<float>(static_cast<std::size_t>(cpu_model.params().size()), 17, 0.1),
                                         {cpu_model.params().size()});
    for (auto* m : {&cpu_model, &gpu_model}) {
        m->params().params().copy_from(adapters);
        m->parameters_changed();
    }
    gpu_model.to(Device::cuda(0), compute);
    const Tokens t = tokens_for(2, 8, 61);
    const bool bf16 = compute == DType::bf16;
    auto loss = [&](models::Gpt& m) { return m.loss(t.tokens, t.targets); };
    double cpu_loss = 0, gpu_loss = 0;
    const auto [want, got] = both_gradients(cpu_model, gpu_model, loss, cpu_loss, gpu_loss);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(bf16 ? 2e-2 : kF32));
    if (bf16)
        CHECK(relative_error(want, got) < 5e-2);
    else
        check_close("LoRA gradients", want, got, kF32);
    CHECK_FALSE(gpu_model.frozen_parameters().has_grads());  // the base stays frozen: it has no gradients
    // Held in the compute dtype alone: no f32 master of a weight nothing updates.
    CHECK(gpu_model.frozen_parameters().dtype() == compute);
    CHECK(gpu_model.frozen_parameters().compute_dtype() == compute);
    cpu_model.merge_lora();
    gpu_model.merge_lora();  // summed in f32 on the host, then held as before (rounded to bf16 once in bf16)
    const auto merged = host(gpu_model.frozen_parameters().params());
    if (bf16)
        CHECK(relative_error(host(cpu_model.frozen_parameters().params()), merged) < 1e-2);
    else
        check_close("merged weights", host(cpu_model.frozen_parameters().params()), merged, kF32);
}
}  // namespace

TEST_CASE("a GPT with LoRA adapters on the GPU matches the CPU: adapter gradients, frozen base, merge" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    SUBCASE("f32") { check_lora(DType::f32); }
    SUBCASE("bf16") { check_lora(DType::bf16); }
}

TEST_CASE("the MLP classifier on the GPU matches the CPU: loss, gradients and logits" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::MlpConfig config{.inputs = 20, .hidden = {16, 8}, .classes = 5};
    models::Mlp cpu_model(config, 7), gpu_model(config, 7);
    gpu_model.to(Device::cuda(0));
    const Tensor x = Tensor::from(random<float>(6 * 20, 41), {6, 20});
    const Tensor y = Tensor::from(std::vector<std::int32_t>{0, 4, 2, 1, 3, 2}, {6});
    {
        autograd::InferenceMode inference;
        check_close("MLP logits", host(cpu_model.logits(x)), host(gpu_model.logits(x)), kF32);
    }
    auto loss = [&](models::Mlp& m) { return m.loss(x, y); };
    double cpu_loss = 0, gpu_loss = 0;
    const auto [want, got] = both_gradients(cpu_model, gpu_model, loss, cpu_loss, gpu_loss);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-5));
    check_close("MLP gradients", want, got, kF32);
}

TEST_CASE("without a GPU, levers says so instead of crashing") {
    if (!kNoGpu) return;  // this machine has one: nothing to check here
    CHECK(gpu_count() == 0);
    CHECK(gpu_names().empty());
    CHECK_THROWS_WITH_AS(use_gpu(0), doctest::Contains("GPU 0 asked for, but"), Error);
    CHECK_THROWS_AS(Tensor::zeros({4}, DType::f32, Device::cuda(0)), Error);  // named, no crash
}

namespace {
// One forward, backward and AdamW step of a GPT in bf16 on the GPU against
// the same GPT in f32 on the CPU.
void check_gpt_in_bf16(const models::GptConfig& config) {
    models::Gpt cpu_model(config, 31), gpu_model(config, 31);
    gpu_model.to(Device::cuda(0), DType::bf16);
    CHECK(gpu_model.params().params().dtype() == DType::f32);  // the master weights
    CHECK(gpu_model.params().grad_dtype() == DType::bf16);
    const std::int64_t T = config.block_size;
    const Tokens t = tokens_for(3, T, 97);
    auto loss = [&](models::Gpt& m) { return m.loss(t.tokens, t.targets); };
    double cpu_loss = 0, gpu_loss = 0;
    const auto [c, gpu_grads] = both_gradients(cpu_model, gpu_model, loss, cpu_loss, gpu_loss);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(2e-2));
    for (const auto& e : cpu_model.params().entries()) {
        const std::vector<float> want(c.begin() + e.offset, c.begin() + e.offset + e.shape.numel());
        const std::vector<float> got(gpu_grads.begin() + e.offset, gpu_grads.begin() + e.offset + e.shape.numel());
        INFO(e.name);
        CHECK(relative_error(want, got) < 5e-2);
    }
    const double cpu_norm = train::clip_grad_norm(cpu_model.params(), 1e9);
    CHECK(train::clip_grad_norm(gpu_model.params(), 1e9) == doctest::Approx(cpu_norm).epsilon(3e-2));

    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    train::AdamW cpu_opt(cpu_model.params(), h), gpu_opt(gpu_model.params(), h);
    cpu_opt.step(1e-3);
    gpu_opt.step(1e-3);
    const auto after = host(gpu_model.params().params()), want = host(cpu_model.params().params());
    double worst = 0;
    for (std::size_t i = 0; i < after.size(); ++i) worst = std::max(worst, static_cast<double>(std::abs(after[i] - want[i])));
    CHECK(worst <= 2.5e-3);  // Adam's first step moves each weight by about lr·sign(g)

    // Sampling reads f32 logits on the host from the bf16 model (its weights refreshed after the step).
    autograd::InferenceMode inference;
    const Tensor one = t.tokens.slice(0, 1);
    check_close("GPT logits without targets", host(cpu_model.logits(one)), host(gpu_model.logits(one)), 5e-2);
}
}  // namespace

TEST_CASE("the whole GPT in bf16 on the GPU follows the CPU's f32: loss, gradients, one AdamW step" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    SUBCASE("head size 8: attention through cuBLAS") {
        check_gpt_in_bf16({.vocab_size = 97, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32});
    }
    SUBCASE("head size 64: the fused attention kernel, over two tiles of 64 positions") {
        check_gpt_in_bf16({.vocab_size = 97, .block_size = 80, .n_layer = 1, .n_head = 2, .n_embd = 128});
    }
}

TEST_CASE("the MLP classifier in bf16 on the GPU follows the CPU's f32: loss, logits, gradients" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::MlpConfig config{.inputs = 20, .hidden = {16, 8}, .classes = 5};
    models::Mlp cpu_model(config, 7), gpu_model(config, 7);
    gpu_model.to(Device::cuda(0), DType::bf16);
    CHECK(gpu_model.params().grad_dtype() == DType::bf16);
    const Tensor x = Tensor::from(random<bf16>(6 * 20, 41), {6, 20});
    const Tensor y = Tensor::from(std::vector<std::int32_t>{0, 4, 2, 1, 3, 2}, {6});
    {
        autograd::InferenceMode inference;
        check_close("MLP logits", host(cpu_model.logits(x)), host(gpu_model.logits(x)), 5e-2);
    }
    auto loss = [&](models::Mlp& m) { return m.loss(x, y); };
    double cpu_loss = 0, gpu_loss = 0;
    const auto [want, got] = both_gradients(cpu_model, gpu_model, loss, cpu_loss, gpu_loss);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(2e-2));
    CHECK(relative_error(want, got) < 5e-2);
}

namespace {
// Tiny models of each model type (their CPU forms match PyTorch's: tests/unit/models/test_llama_family.cpp).
std::vector<models::LlamaConfig> llama_family() {
    std::vector<models::LlamaConfig> out;
    for (const char* type : {"llama", "mistral", "qwen2", "qwen3"}) {
        models::LlamaConfig c = testing::tiny_llama({.vocab = 67});
        c.model_type = type;
        c.tie_word_embeddings = c.model_type == "llama" || c.model_type == "qwen2";
        if (c.model_type == "llama") c.rope_scaling = nn::RopeScaling{.original_max_position_embeddings = 16};
        if (c.model_type == "mistral") {  // heads of 64: the fused attention in bf16, with its window
            c.sliding_window = 5;
            c.hidden_size = 128;
            c.num_attention_heads = 2;
            c.num_key_value_heads = 1;
        }
        if (c.model_type == "qwen2") c.attention_bias = true;
        if (c.model_type == "qwen3") {
            c.qk_norm = true;
            c.head_dim = 128;  // its own, wider than hidden / heads: the fused attention's other head size
        }
        out.push_back(c);
    }
    for (const char* type : {"smollm3", "gemma2", "gemma3_text"}) out.push_back(testing::tiny_of_type(type, {.vocab = 67}));
    // A context of 16: longrope's long factors take over past 8 positions, within the rows and the generation.
    out.push_back(testing::tiny_of_type("phi3", {.vocab = 67, .context = 16}));
    return out;
}
}  // namespace

TEST_CASE("the Llama family on the GPU matches the CPU: loss and gradients in f32 and bf16, KV-cache generation" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    for (const models::LlamaConfig& c : llama_family()) {
        CAPTURE(c.model_type);
        for (const DType compute : {DType::f32, DType::bf16}) {
            CAPTURE(name_of(compute));
            models::Llama cpu_model(c, 11), gpu_model(c, 11);
            gpu_model.to(Device::cuda(0), compute);
            const Tokens t = tokens_for(2, 9, 67, 3);
            // Whole rows, then packed ones (three documents a row: attention within each).
            const Tensor documents = Tensor::from(std::vector<std::int32_t>{0, 0, 0, 1, 1, 1, 1, 2, 2, 0, 1, 1, 1, 1, 1, 1, 1, 2},
                                                  {2, 9});
            for (const bool packed : {false, true}) {
                CAPTURE(packed);
                auto loss = [&](models::Llama& m) {
                    return packed ? m.loss(t.tokens, t.targets, documents) : m.loss(t.tokens, t.targets);
                };
                double cpu_loss = 0, gpu_loss = 0;
                const auto [want, got] = both_gradients(cpu_model, gpu_model, loss, cpu_loss, gpu_loss);
                CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(compute == DType::bf16 ? 2e-2 : kF32));
                if (compute == DType::bf16)
                    CHECK(relative_error(want, got) < 5e-2);
                else
                    check_close("Llama-family gradients", want, got, kF32);
            }
            if (compute == DType::bf16) continue;
            // Greedy generation through the KV cache, the same tokens on both.
            Rng a(1), b(1);
            const models::SampleOptions greedy{.max_new_tokens = 8, .top_k = 1};
            CHECK(models::generate(gpu_model, {5, 9, 2}, greedy, a) == models::generate(cpu_model, {5, 9, 2}, greedy, b));
        }
    }
}
