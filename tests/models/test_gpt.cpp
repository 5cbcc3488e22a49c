#include "models/gpt.hpp"
#include "tests/gradcheck.hpp"

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
