#include "levers/core/rng.hpp"
#include "levers/nn/gradcheck.hpp"
#include "levers/models/gpt.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace levers;

namespace {
models::GptConfig tiny() { return {.vocab_size = 7, .block_size = 5, .n_layer = 2, .n_head = 2, .n_embd = 8}; }

Tensor ids(std::vector<std::int32_t> v, std::int64_t batch) {
    const auto time = static_cast<std::int64_t>(v.size()) / batch;
    return Tensor::from(v, {batch, time});
}

// Larger than GPT-2's 0.02 init so every path carries signal.
void perturb(ParamSet& params, std::uint64_t seed) {
    Rng rng(seed);
    double* p = params.params().data<double>();
    for (std::int64_t i = 0; i < params.size(); ++i) p[i] += rng.normal() * 0.3;
}
}  // namespace

TEST_CASE("GPT: every parameter's gradient matches finite differences (double)") {
    models::Gpt gpt(tiny(), 11);
    gpt.to(Device::cpu(), DType::f64);
    perturb(gpt.params(), 12);
    const Tensor tokens = ids({1, 2, 3, 4, 0, 6, 6, 5, 2, 1}, 2);
    const Tensor targets = ids({2, 3, 4, 0, -100, 6, 5, 2, 1, 3}, 2);  // one padded position
    const auto report = nn::check_parameter_gradients(gpt, [&] { return gpt.loss(tokens, targets); });
    INFO(report.str());
    CHECK(report.passed);
    std::int64_t elements = 0;
    for (const auto& e : gpt.params().entries()) elements += e.shape.numel();
    CHECK(report.elements == elements);  // every parameter, every element
}

TEST_CASE("GPT: the logits' gradient through the tied head matches finite differences too (double)") {
    models::Gpt gpt(tiny(), 3);
    gpt.to(Device::cpu(), DType::f64);
    perturb(gpt.params(), 4);
    const Tensor tokens = ids({1, 2, 3, 4, 0, 6}, 2);
    const auto report = nn::check_parameter_gradients(gpt, [&] { return gpt.logits(tokens); });
    INFO(report.str());
    CHECK(report.passed);
}

TEST_CASE("GPT: initial loss is near log(vocab), the tied head shares wte, names are Hugging Face's") {
    models::GptConfig cfg{.vocab_size = 50, .block_size = 8, .n_layer = 1, .n_head = 2, .n_embd = 16};
    models::Gpt gpt(cfg, 1);
    std::vector<std::int32_t> tokens(8), targets(8);
    for (int i = 0; i < 8; ++i) tokens[i] = targets[(i + 7) % 8] = i * 5;
    const double loss = gpt.loss(ids(tokens, 1), ids(targets, 1)).item();
    CHECK(loss == doctest::Approx(std::log(50.0)).epsilon(0.05));
    int heads_named_lm = 0;
    for (const auto& e : gpt.params().entries()) heads_named_lm += e.name.find("lm_head") != std::string::npos;
    CHECK(heads_named_lm == 0);
    CHECK(gpt.params().entries().size() == 2 + 12 * 1 + 2);
    CHECK(gpt.params().entries()[0].name == "wte.weight");
    CHECK(gpt.params().entries()[4].name == "h.0.attn.c_attn.weight");
    CHECK(gpt.params().entries().back().name == "ln_f.bias");
    // The logits are the features times wte, the loss their cross-entropy.
    const Tensor logits = gpt.logits(ids(tokens, 1));
    CHECK(logits.shape() == Shape{1, 8, 50});
}

TEST_CASE("GPT: parameter count of the GPT-2 small shape is 124M") {
    models::GptConfig cfg{.vocab_size = 50257, .block_size = 1024, .n_layer = 12, .n_head = 12, .n_embd = 768};
    CHECK(cfg.parameter_count() == 124439808);
}

TEST_CASE("GPT: bad configs and inputs are refused with the field named; backward without a graph, or twice, too") {
    CHECK_THROWS_WITH_AS(models::Gpt(models::GptConfig{.n_head = 3, .n_embd = 128}, 0),
                         doctest::Contains("n_embd (128) must be a positive multiple of n_head (3)"), Error);
    models::Gpt gpt(tiny(), 0);
    CHECK_THROWS_WITH_AS(gpt.logits(ids(std::vector<std::int32_t>(6, 1), 1)), doctest::Contains("block_size (5)"),
                         Error);
    CHECK_THROWS_WITH_AS(gpt.logits(ids({1, 9, 2}, 1)),
                         doctest::Contains("token id 9 at position 1 is outside the vocabulary [0, 7)"), Error);
    CHECK_THROWS_WITH_AS(Tensor::zeros({1}, DType::f32).backward(), doctest::Contains("was not computed by recorded ops"),
                         Error);
    const Tensor loss = gpt.loss(ids({1, 2, 3}, 1), ids({2, 3, 4}, 1));
    loss.backward();
    CHECK_THROWS_WITH_AS(loss.backward(), doctest::Contains("graph an earlier backward already freed"), Error);
    {
        autograd::InferenceMode inference;
        const Tensor l = gpt.loss(ids({1, 2, 3}, 1), ids({2, 3, 4}, 1));
        CHECK_FALSE(l.requires_grad());
        CHECK(autograd::tape().nodes() == 0);
    }
}

TEST_CASE("GPT with LoRA: adapter gradients match finite differences, the base stays frozen, merging keeps the loss") {
    models::Gpt gpt(tiny(), 21);
    gpt.to(Device::cpu(), DType::f64);
    perturb(gpt.params(), 22);
    const Tensor tokens = ids({1, 2, 3, 4, 0, 6, 6, 5, 2, 1}, 2);
    const Tensor targets = ids({2, 3, 4, 0, 1, 6, 5, 2, 1, 3}, 2);
    auto loss = [&] {
        autograd::InferenceMode inference;
        return gpt.loss(tokens, targets).item();
    };
    const double before = loss();
    const std::int64_t all = gpt.params().size();

    gpt.enable_lora(2, 4.0, 23);
    CHECK(loss() == doctest::Approx(before).epsilon(1e-12));  // B = 0: the same function
    CHECK(gpt.params().size() < all / 2);                     // only the adapters train
    CHECK(gpt.params().entries()[0].name == "h.0.attn.c_attn.lora_a");
    CHECK_FALSE(gpt.frozen_parameters().has_grads());
    perturb(gpt.params(), 24);  // B nonzero too
    const auto report = nn::check_parameter_gradients(gpt, [&] { return gpt.loss(tokens, targets); });
    INFO(report.str());
    CHECK(report.passed);

    const double adapted = loss();
    CHECK(adapted != doctest::Approx(before));
    gpt.merge_lora();
    CHECK(loss() == doctest::Approx(adapted).epsilon(1e-10));
    CHECK_THROWS_WITH_AS(gpt.enable_lora(2, 4.0, 1), doctest::Contains("already has LoRA"), Error);
    models::Gpt other(tiny(), 1);
    CHECK_THROWS_WITH_AS(other.enable_lora(0, 4.0, 1), doctest::Contains("lora rank must be in 1..8"), Error);
    CHECK_FALSE(other.has_lora());  // refused before anything changed
}

TEST_CASE("GPT: to() on the CPU keeps it there; bf16 there is refused, naming what would work") {
    models::GptConfig config{.vocab_size = 11, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 4};
    models::Gpt g(config, 1);
    g.to(Device::cpu(), DType::f64);
    CHECK(g.device().is_cpu());
    CHECK(g.params().dtype() == DType::f64);
    g.to(Device::cpu());
    CHECK(g.params().dtype() == DType::f32);
    CHECK_THROWS_WITH_AS(g.to(Device::cpu(), DType::bf16), doctest::Contains("bf16 needs a GPU"), Error);
    CHECK(g.device().is_cpu());
    CHECK(g.compute_dtype() == DType::f32);
}

TEST_CASE("GPT: initialisation is GPT-2's, the same from the same seed") {
    models::GptConfig config{.vocab_size = 30, .block_size = 6, .n_layer = 3, .n_head = 2, .n_embd = 16};
    models::Gpt a(config, 5), b(config, 5), c(config, 6);
    CHECK(a.params().params().values() == b.params().params().values());
    CHECK(a.params().params().values() != c.params().params().values());
    const auto gain = a.h[0].ln_1.weight.value().values();
    CHECK(std::all_of(gain.begin(), gain.end(), [](double g) { return g == 1; }));
    auto stddev = [](const std::vector<double>& v) {
        double s = 0;
        for (double x : v) s += x * x;
        return std::sqrt(s / static_cast<double>(v.size()));
    };
    CHECK(stddev(a.h[0].mlp.c_fc.weight.value().values()) == doctest::Approx(0.02).epsilon(0.1));
    CHECK(stddev(a.h[0].mlp.c_proj.weight.value().values()) == doctest::Approx(0.02 / std::sqrt(6.0)).epsilon(0.1));
}
