#include "models/gpt.hpp"
#include "tests/gradcheck.hpp"

#include <algorithm>
#include <cmath>

using namespace levers;
using namespace levers::testing;

namespace {
models::GptConfig tiny() { return {.vocab_size = 7, .block_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8}; }
}  // namespace

TEST_CASE("GPT: every parameter's gradient matches finite differences (double)") {
    models::Gpt<double> gpt(tiny(), 11);
    // Larger than GPT-2's 0.02 init so every path carries signal.
    Rng rng(12);
    double* p = gpt.params().params().data<double>();
    for (std::int64_t i = 0; i < gpt.params().size(); ++i) p[i] += rng.normal() * 0.3;
    std::vector<std::int32_t> tokens = {1, 2, 3, 4, 0, 6, 6, 5, 2, 1};
    std::vector<std::int32_t> targets = {2, 3, 4, 0, -100, 6, 5, 2, 1, 3};  // one padded position
    auto loss = [&] { return gpt.forward(tokens.data(), targets.data(), 2, 5); };
    loss();
    gpt.params().zero_grad();
    gpt.backward();
    std::vector<double> grad(gpt.params().grads().data<double>(),
                             gpt.params().grads().data<double>() + gpt.params().size());
    check_gradient("GPT parameters", p, grad.data(), grad.size(), loss, 1e-6);
}

TEST_CASE("GPT: initial loss is near log(vocab) and the tied head shares wte") {
    models::GptConfig cfg{.vocab_size = 50, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16};
    models::Gpt<float> gpt(cfg, 1);
    std::vector<std::int32_t> tokens(8), targets(8);
    for (int i = 0; i < 8; ++i) tokens[i] = targets[(i + 7) % 8] = i * 5;
    float loss = gpt.forward(tokens.data(), targets.data(), 1, 8);
    CHECK(loss == doctest::Approx(std::log(50.0)).epsilon(0.05));
    int heads_named_lm = 0;
    for (const auto& e : gpt.params().entries()) heads_named_lm += e.name.find("lm_head") != std::string::npos;
    CHECK(heads_named_lm == 0);
    CHECK(gpt.params().entries().size() == 2 + 12 * 1 + 2);
}

TEST_CASE("GPT: parameter count of the GPT-2 small shape is 124M") {
    models::GptConfig cfg{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768};
    CHECK(cfg.parameter_count() == 124439808);
}

TEST_CASE("GPT: bad configs and inputs are refused with the field named") {
    CHECK_THROWS_WITH_AS(models::Gpt<float>(models::GptConfig{.n_head = 3, .n_embd = 128}, 0),
                         doctest::Contains("n_embd (128) must be a positive multiple of n_head (3)"), Error);
    models::Gpt<float> gpt(tiny(), 0);
    std::vector<std::int32_t> tokens(6, 1);
    CHECK_THROWS_WITH_AS(gpt.forward(tokens.data(), nullptr, 1, 6), doctest::Contains("block_size (5)"), Error);
    CHECK_THROWS_WITH_AS(gpt.backward(), doctest::Contains("needs a forward() with targets"), Error);
}

TEST_CASE("GPT with LoRA: adapter gradients match finite differences, the base stays frozen, merging keeps the loss") {
    models::Gpt<double> gpt(tiny(), 21);
    Rng rng(22);
    double* p = gpt.params().params().data<double>();
    for (std::int64_t i = 0; i < gpt.params().size(); ++i) p[i] += rng.normal() * 0.3;
    std::vector<std::int32_t> tokens = {1, 2, 3, 4, 0, 6, 6, 5, 2, 1};
    std::vector<std::int32_t> targets = {2, 3, 4, 0, 1, 6, 5, 2, 1, 3};
    auto loss = [&] { return gpt.forward(tokens.data(), targets.data(), 2, 5); };
    const double before = loss();

    gpt.enable_lora(2, 4.0, 23);
    CHECK(loss() == doctest::Approx(before).epsilon(1e-12));  // B = 0: the same function
    double* lp = gpt.lora_params().params().data<double>();
    for (std::int64_t i = 0; i < gpt.lora_params().size(); ++i) lp[i] += rng.normal() * 0.3;  // B nonzero too
    loss();
    gpt.params().zero_grad();
    gpt.lora_params().zero_grad();
    gpt.backward();
    const double* base_grads = gpt.params().grads().data<double>();
    CHECK(std::all_of(base_grads, base_grads + gpt.params().size(), [](double g) { return g == 0; }));
    std::vector<double> grad(gpt.lora_params().grads().data<double>(),
                             gpt.lora_params().grads().data<double>() + gpt.lora_params().size());
    check_gradient("LoRA adapters", lp, grad.data(), grad.size(), loss, 1e-6);

    const double adapted = loss();
    CHECK(adapted != doctest::Approx(before));
    gpt.merge_lora();
    CHECK(loss() == doctest::Approx(adapted).epsilon(1e-10));
    CHECK_THROWS_WITH_AS(gpt.enable_lora(2, 4.0, 1), doctest::Contains("already has LoRA"), Error);
    models::Gpt<double> other(tiny(), 1);
    CHECK_THROWS_WITH_AS(other.enable_lora(0, 4.0, 1), doctest::Contains("lora rank must be in 1..n_embd"), Error);
}

TEST_CASE("GPT: to_device on the CPU keeps it there; bf16 there is refused, naming what would work") {
    models::GptConfig config{.vocab_size = 11, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4};
    models::Gpt<double> g64(config, 1);
    g64.to_device(Device::cpu());  // the default compute dtype is the card's f32: nothing moves on the CPU
    CHECK(g64.device().is_cpu());
    models::Gpt<float> g32(config, 1);
    CHECK_THROWS_WITH_AS(g32.to_device(Device::cpu(), DType::bf16), doctest::Contains("bf16 needs a card"), Error);
    CHECK(g32.device().is_cpu());
    CHECK(g32.compute_dtype() == DType::f32);
}
