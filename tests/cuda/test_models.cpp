// Whole models on the card against the same models on the CPU: the GPT (with
// and without LoRA adapters) and the MLP in f32 to 1e-5, and in bf16 within
// what bf16 keeps (losses to 2%, each gradient tensor's direction to 5%).
// Skipped, and counted as skipped, where no card is present.
#include "framework/core/error.hpp"
#include "framework/core/gpu.hpp"
#include "framework/train/optimizer.hpp"
#include "framework/train/param_kernels.hpp"
#include "models/gpt.hpp"
#include "models/mlp.hpp"
#include "tests/cuda/card_values.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <utility>

using namespace levers;
using namespace levers::testing;

namespace {

const bool kNoGpu = gpu_count() == 0;
constexpr double kF32 = Precision<float>::values;

// A tensor's values on the host as f32 (bf16 widened).
std::vector<float> host(const Tensor& t) {
    const Tensor h = t.to(Device::cpu());
    if (h.dtype() != DType::bf16) return std::vector<float>(h.data<float>(), h.data<float>() + h.numel());
    const auto* bits = static_cast<const std::uint16_t*>(h.raw());
    std::vector<float> out;
    for (std::int64_t i = 0; i < h.numel(); ++i) out.push_back(bf16_to_float(bits[i]));
    return out;
}

// Zeroes both models' gradients, runs backward on each (after a forward with
// targets), and returns the CPU's gradients and the card's, both as f32.
template <class Model>
std::pair<std::vector<float>, std::vector<float>> both_gradients(Model& cpu_model, Model& gpu_model) {
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    cpu_model.backward();
    gpu_model.backward();
    return {host(cpu_model.params().grads()), host(gpu_model.params().grads())};
}

}  // namespace

TEST_CASE("the whole GPT on the card matches the CPU: loss, every gradient, clipping and one AdamW step" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    models::GptConfig config{.vocab_size = 97, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32};
    models::Gpt<float> cpu_model(config, 31), gpu_model(config, 31);  // the same seed: the same weights
    gpu_model.to_device(Device::cuda(0));
    REQUIRE(gpu_model.device() == Device::cuda(0));
    std::vector<std::int32_t> tokens(3 * 16), targets(3 * 16);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % 97);
        targets[i] = static_cast<std::int32_t>((i * 11 + 5) % 97);
    }
    targets[4] = -100;  // an ignored position
    const float cpu_loss = cpu_model.forward(tokens.data(), targets.data(), 3, 16);
    const float gpu_loss = gpu_model.forward(tokens.data(), targets.data(), 3, 16);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(1e-5));
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    cpu_model.backward();
    gpu_model.backward();
    check_close("GPT gradients", host(cpu_model.params().grads()), host(gpu_model.params().grads()), kF32);
    CHECK(train::clip_grad_norm(gpu_model.params(), 0.5) ==
          doctest::Approx(train::clip_grad_norm(cpu_model.params(), 0.5)).epsilon(1e-5));

    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    train::AdamW<float> cpu_opt(cpu_model.params(), h), gpu_opt(gpu_model.params(), h);
    cpu_opt.step(1e-3);
    gpu_opt.step(1e-3);
    check_close("GPT parameters after a step", host(cpu_model.params().params()), host(gpu_model.params().params()),
                kF32);
    check_close("AdamW second moments", host(cpu_opt.second_moment()), host(gpu_opt.second_moment()), kF32);

    // Sampling reads the logits on the host.
    cpu_model.forward(tokens.data(), nullptr, 1, 16);
    gpu_model.forward(tokens.data(), nullptr, 1, 16);
    check_close("GPT logits without targets", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 16 * 97),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 16 * 97), kF32);

    // A target outside the vocabulary is refused on the card as on the CPU.
    targets[7] = 97;
    for (auto* m : {&cpu_model, &gpu_model})
        CHECK_THROWS_WITH_AS(m->forward(tokens.data(), targets.data(), 3, 16),
                             doctest::Contains("target 97 in row 7 is outside [0, 97)"), Error);
}

namespace {
// A GPT with LoRA adapters on the card, computing in `compute`, against the
// same on the CPU in f32: the adapters' gradients, a frozen base, the merge.
void check_lora(DType compute) {
    models::GptConfig config{.vocab_size = 61, .block_size = 8, .n_layer = 2, .n_head = 2, .n_embd = 16};
    models::Gpt<float> cpu_model(config, 5), gpu_model(config, 5);
    for (auto* m : {&cpu_model, &gpu_model}) m->enable_lora(4, 8.0, 9);
    gpu_model.to_device(Device::cuda(0), compute);
    // Non-zero B, so the adapters change the function.
    const auto b = random<float>(static_cast<std::size_t>(cpu_model.lora_params().size()), 17, 0.1);
    std::copy(b.begin(), b.end(), cpu_model.lora_params().params().data<float>());
    Tensor gpu_adapters = gpu_model.lora_params().params();  // a handle on the card's buffer
    gpu_adapters.copy_from(cpu_model.lora_params().params());
    std::vector<std::int32_t> tokens(2 * 8), targets(2 * 8);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((i * 5 + 1) % 61);
        targets[i] = static_cast<std::int32_t>((i * 3 + 2) % 61);
    }
    const bool bf16 = compute == DType::bf16;
    CHECK(gpu_model.forward(tokens.data(), targets.data(), 2, 8) ==
          doctest::Approx(cpu_model.forward(tokens.data(), targets.data(), 2, 8)).epsilon(bf16 ? 2e-2 : kF32));
    cpu_model.backward();
    gpu_model.backward();
    const auto want = host(cpu_model.lora_params().grads()), got = host(gpu_model.lora_params().grads());
    if (bf16)
        CHECK(relative_error(want, got) < 5e-2);
    else
        check_close("LoRA gradients", want, got, kF32);
    const auto base = host(gpu_model.params().grads());
    CHECK(std::all_of(base.begin(), base.end(), [](float g) { return g == 0; }));  // the base stays frozen
    cpu_model.merge_lora();
    gpu_model.merge_lora();  // on the f32 master weights, in either precision
    check_close("merged weights", host(cpu_model.params().params()), host(gpu_model.params().params()), kF32);
}
}  // namespace

TEST_CASE("a GPT with LoRA adapters on the card matches the CPU: adapter gradients, frozen base, merge" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    SUBCASE("f32") { check_lora(DType::f32); }
    SUBCASE("bf16") { check_lora(DType::bf16); }
}

TEST_CASE("the MLP classifier on the card matches the CPU: loss, gradients and logits" * doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::MlpConfig config{.inputs = 20, .hidden = {16, 8}, .classes = 5};
    models::Mlp<float> cpu_model(config, 7), gpu_model(config, 7);
    gpu_model.to_device(Device::cuda(0));
    const auto x = random<float>(6 * 20, 41);
    const std::vector<std::int32_t> y = {0, 4, 2, 1, 3, 2};
    const float cpu_loss = cpu_model.forward(x.data(), y.data(), 6);
    CHECK(gpu_model.forward(x.data(), y.data(), 6) == doctest::Approx(cpu_loss).epsilon(1e-5));
    check_close("MLP logits", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 30),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 30), kF32);
    cpu_model.params().zero_grad();
    gpu_model.params().zero_grad();
    cpu_model.backward();
    gpu_model.backward();
    check_close("MLP gradients", host(cpu_model.params().grads()), host(gpu_model.params().grads()), kF32);
}

TEST_CASE("without a card, levers says so instead of crashing") {
    if (!kNoGpu) return;  // this machine has one: nothing to check here
    CHECK(gpu_count() == 0);
    CHECK(gpu_names().empty());
    CHECK_THROWS_WITH_AS(use_gpu(0), doctest::Contains("card 0 asked for, but this process sees 0 cards"), Error);
    CHECK_THROWS_AS(Tensor::zeros({4}, DType::f32, Device::cuda(0)), Error);  // cudaMalloc named, no crash
}

namespace {
// One forward, backward and AdamW step of a GPT in bf16 on the card against
// the same GPT in f32 on the CPU.
void check_gpt_in_bf16(const models::GptConfig& config) {
    models::Gpt<float> cpu_model(config, 31), gpu_model(config, 31);
    gpu_model.to_device(Device::cuda(0), DType::bf16);
    CHECK(gpu_model.params().params().dtype() == DType::f32);  // the master weights
    CHECK(gpu_model.params().grad_dtype() == DType::bf16);
    const std::int64_t T = config.block_size;
    std::vector<std::int32_t> tokens(3 * T), targets(3 * T);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        tokens[i] = static_cast<std::int32_t>((i * 7 + 3) % 97);
        targets[i] = static_cast<std::int32_t>((i * 11 + 5) % 97);
    }
    const float cpu_loss = cpu_model.forward(tokens.data(), targets.data(), 3, T);
    const float gpu_loss = gpu_model.forward(tokens.data(), targets.data(), 3, T);
    CHECK(gpu_loss == doctest::Approx(cpu_loss).epsilon(2e-2));
    const auto [c, gpu_grads] = both_gradients(cpu_model, gpu_model);
    for (const auto& e : cpu_model.params().entries()) {
        const std::vector<float> want(c.begin() + e.offset, c.begin() + e.offset + e.shape.numel());
        const std::vector<float> got(gpu_grads.begin() + e.offset, gpu_grads.begin() + e.offset + e.shape.numel());
        INFO(e.name);
        CHECK(relative_error(want, got) < 5e-2);
    }
    const double cpu_norm = train::clip_grad_norm(cpu_model.params(), 1e9);
    CHECK(train::clip_grad_norm(gpu_model.params(), 1e9) == doctest::Approx(cpu_norm).epsilon(3e-2));

    const kernels::AdamWHyper h{.lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    train::AdamW<float> cpu_opt(cpu_model.params(), h), gpu_opt(gpu_model.params(), h);
    cpu_opt.step(1e-3);
    gpu_opt.step(1e-3);
    const Tensor after = gpu_model.params().params().to(Device::cpu());
    const float* want = cpu_model.params().params().data<float>();
    double worst = 0;
    for (std::int64_t i = 0; i < after.numel(); ++i)
        worst = std::max(worst, static_cast<double>(std::abs(after.data<float>()[i] - want[i])));
    CHECK(worst <= 2.5e-3);  // Adam's first step moves each weight by about lr·sign(g)

    // Sampling reads f32 logits on the host from the bf16 model.
    cpu_model.forward(tokens.data(), nullptr, 1, T);
    gpu_model.forward(tokens.data(), nullptr, 1, T);
    check_close("GPT logits without targets", std::vector<float>(cpu_model.logits(), cpu_model.logits() + T * 97),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + T * 97), 5e-2);
}
}  // namespace

TEST_CASE("the whole GPT in bf16 on the card follows the CPU's f32: loss, gradients, one AdamW step" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    SUBCASE("head size 8: attention through cuBLAS") {
        check_gpt_in_bf16({.vocab_size = 97, .block_size = 16, .n_layer = 2, .n_head = 4, .n_embd = 32});
    }
    SUBCASE("head size 64: the fused attention kernel, over two tiles of 64 positions") {
        check_gpt_in_bf16({.vocab_size = 97, .block_size = 80, .n_layer = 1, .n_head = 2, .n_embd = 128});
    }
}

TEST_CASE("the MLP classifier in bf16 on the card follows the CPU's f32: loss, logits, gradients" *
          doctest::skip(kNoGpu)) {
    use_gpu(0);
    const models::MlpConfig config{.inputs = 20, .hidden = {16, 8}, .classes = 5};
    models::Mlp<float> cpu_model(config, 7), gpu_model(config, 7);
    gpu_model.to_device(Device::cuda(0), DType::bf16);
    CHECK(gpu_model.params().grad_dtype() == DType::bf16);
    const auto x = random<bf16>(6 * 20, 41);
    const std::vector<std::int32_t> y = {0, 4, 2, 1, 3, 2};
    const float cpu_loss = cpu_model.forward(x.data(), y.data(), 6);
    CHECK(gpu_model.forward(x.data(), y.data(), 6) == doctest::Approx(cpu_loss).epsilon(2e-2));
    check_close("MLP logits", std::vector<float>(cpu_model.logits(), cpu_model.logits() + 30),
                std::vector<float>(gpu_model.logits(), gpu_model.logits() + 30), 5e-2);
    const auto [want, got] = both_gradients(cpu_model, gpu_model);
    CHECK(relative_error(want, got) < 5e-2);
}
