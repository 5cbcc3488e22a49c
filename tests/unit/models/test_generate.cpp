#include "levers/core/error.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/gpt.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;

TEST_CASE("sampling: top-k 1 and near-zero temperature are greedy") {
    const float logits[] = {0.1f, 2.0f, -1.0f, 1.9f};
    Rng rng(1);
    for (int i = 0; i < 50; ++i) {
        CHECK(models::sample_token(logits, 4, {.temperature = 1.0, .top_k = 1}, rng) == 1);
        CHECK(models::sample_token(logits, 4, {.temperature = 1e-4, .top_k = 0}, rng) == 1);
    }
}

TEST_CASE("sampling: top-k keeps the k likeliest, in softmax proportions") {
    const float logits[] = {0.0f, std::log(3.0f), -5.0f, std::log(1.0f) - 0.0f};  // p ∝ 1, 3, e^-5, 1
    Rng rng(2);
    int counts[4] = {};
    const int n = 20000;
    for (int i = 0; i < n; ++i) counts[models::sample_token(logits, 4, {.temperature = 1.0, .top_k = 2}, rng)]++;
    CHECK(counts[2] == 0);
    CHECK(counts[0] + counts[3] + counts[1] == n);
    // The two kept are token 1 (weight 3) and one of the weight-1 ties.
    CHECK(static_cast<double>(counts[1]) / n == doctest::Approx(0.75).epsilon(0.03));
}

TEST_CASE("generate appends the requested tokens, deterministically for a seed") {
    models::Gpt gpt({.vocab_size = 11, .block_size = 4, .n_layer = 1, .n_head = 1, .n_embd = 8}, 3);
    models::SampleOptions opts{.max_new_tokens = 9, .temperature = 1.0, .top_k = 5};
    Rng a(7), b(7);
    auto first = models::generate(gpt, {1, 2}, opts, a);
    auto second = models::generate(gpt, {1, 2}, opts, b);
    CHECK(first.size() == 11);  // the window slides past block_size
    CHECK(first == second);
    for (auto t : first) CHECK((t >= 0 && t < 11));
    CHECK_THROWS_WITH_AS(models::generate(gpt, {}, opts, a), doctest::Contains("needs a prompt"), Error);
    opts.temperature = -0.5;
    CHECK_THROWS_WITH_AS(models::generate(gpt, {1}, opts, a), doctest::Contains("temperature must be >= 0 (0: greedy)"),
                         Error);
}

TEST_CASE("temperature 0 is greedy decoding: the likeliest token each time, the first of ties, no draw") {
    const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
    Rng rng(3), untouched(3);
    for (int i = 0; i < 10; ++i) CHECK(models::sample_token(logits, 4, {.temperature = 0}, rng) == 1);
    CHECK(rng.uniform() == untouched.uniform());  // nothing drawn
    // Through a model: the same tokens as top_k = 1 (the likeliest kept), whatever the seed.
    models::Gpt gpt({.vocab_size = 11, .block_size = 8, .n_layer = 1, .n_head = 1, .n_embd = 8}, 5);
    Rng a(1), b(2);
    const auto greedy = models::generate(gpt, {3, 4}, {.max_new_tokens = 6, .temperature = 0}, a);
    const auto top1 = models::generate(gpt, {3, 4}, {.max_new_tokens = 6, .temperature = 1.0, .top_k = 1}, b);
    CHECK(greedy == top1);
}

TEST_CASE("sampling: top-p keeps the fewest likeliest tokens whose probability reaches it") {
    // p = 0.5, 0.3, 0.15, 0.05
    const float logits[] = {std::log(0.3f), std::log(0.05f), std::log(0.5f), std::log(0.15f)};
    Rng rng(3);
    int counts[4] = {};
    const int n = 20000;
    for (int i = 0; i < n; ++i) counts[models::sample_token(logits, 4, {.temperature = 1.0, .top_p = 0.75}, rng)]++;
    CHECK(counts[1] == 0);  // 0.5 + 0.3 reach 0.75: tokens 2 and 0 only
    CHECK(counts[3] == 0);
    CHECK(static_cast<double>(counts[2]) / n == doctest::Approx(0.5 / 0.8).epsilon(0.03));
    for (int i = 0; i < 100; ++i) CHECK(models::sample_token(logits, 4, {.temperature = 1.0, .top_p = 0.4}, rng) == 2);
    CHECK_THROWS_WITH_AS(models::sample_token(logits, 4, {.top_p = 0}, rng), doctest::Contains("top_p must be in (0, 1]"),
                         Error);
}

TEST_CASE("generation stops at a stop token, which it keeps") {
    models::Gpt gpt({.vocab_size = 5, .block_size = 8, .n_layer = 1, .n_head = 1, .n_embd = 8}, 3);
    Rng rng(1);
    // Every token stops: one is drawn, then generation ends.
    const auto out = models::generate(gpt, {1, 2}, {.max_new_tokens = 6, .top_k = 0, .stop = {0, 1, 2, 3, 4}}, rng);
    CHECK(out.size() == 3);
}
