#include "levers/core/error.hpp"
#include "levers/models/batch_generate.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/gpt.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <set>

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

TEST_CASE("sampling: the whole vocabulary (top-k 0, top-p 1) in softmax proportions, at a temperature") {
    const float logits[] = {0.0f, std::log(3.0f), -30.0f, std::log(2.0f)};  // p ∝ 1, 3, ~0, 2
    Rng rng(3);
    int counts[4] = {};
    const int n = 30000;
    for (int i = 0; i < n; ++i) counts[models::sample_token(logits, 4, {.temperature = 1.0, .top_k = 0}, rng)]++;
    CHECK(counts[2] == 0);
    CHECK(static_cast<double>(counts[0]) / n == doctest::Approx(1.0 / 6).epsilon(0.04));
    CHECK(static_cast<double>(counts[1]) / n == doctest::Approx(3.0 / 6).epsilon(0.03));
    CHECK(static_cast<double>(counts[3]) / n == doctest::Approx(2.0 / 6).epsilon(0.03));
    // Temperature 2 flattens: p ∝ 1, √3, ~0, √2.
    for (int& c : counts) c = 0;
    for (int i = 0; i < n; ++i) counts[models::sample_token(logits, 4, {.temperature = 2.0, .top_k = 0}, rng)]++;
    const double z = 1 + std::sqrt(3.0) + std::sqrt(2.0);
    CHECK(static_cast<double>(counts[1]) / n == doctest::Approx(std::sqrt(3.0) / z).epsilon(0.03));
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

TEST_CASE("batched generation: rows of different lengths, each stopping on its own, token for token what each "
          "generates alone (Llama, Gemma 2's window and soft caps, SmolLM3's layers without rotation)") {
    for (const std::string type : {"llama", "gemma2", "smollm3"}) {
        CAPTURE(type);
        testing::TinyLlama t{.vocab = 96, .hidden = 32, .intermediate = 48, .layers = 2, .heads = 4, .kv_heads = 2,
                             .context = 64};
        models::Llama model(type == "llama" ? testing::tiny_llama(t) : testing::tiny_of_type(type, t), 11);
        // The first prompt twice, as a GRPO group's completions share theirs.
        const std::vector<std::vector<std::int32_t>> prompts = {{5, 9, 13}, {7}, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {40, 41},
                                                                {5, 9, 13}};
        models::SampleOptions greedy{.max_new_tokens = 12, .temperature = 0};
        Rng rng(1);
        // The stop token: the fourth that the first prompt makes alone, so rows end at different steps.
        const auto first = models::generate(model, prompts[0], greedy, rng);
        greedy.stop = {first[prompts[0].size() + 3]};
        std::vector<std::vector<std::int32_t>> alone;
        for (const auto& p : prompts) {
            const auto whole = models::generate(model, p, greedy, rng);
            alone.emplace_back(whole.begin() + static_cast<std::ptrdiff_t>(p.size()), whole.end());
        }
        const models::BatchGeneration together = models::generate_batch(model, prompts, greedy, rng);
        CHECK(together.completions == alone);
        CHECK(together.completions[0].back() == greedy.stop[0]);
        CHECK(together.stopped[0]);
        std::set<std::size_t> lengths;  // the rows ended at different steps
        for (const auto& c : alone) lengths.insert(c.size());
        CHECK(lengths.size() >= 2);
        std::int64_t tokens = 0;
        for (const auto& c : alone) tokens += static_cast<std::int64_t>(c.size());
        // Each token after a prompt's first came from one row's step: a finished row is computed no more.
        CHECK(together.row_steps == tokens - static_cast<std::int64_t>(prompts.size()));
    }
    models::Llama model(testing::tiny_llama({.vocab = 96}), 1);
    Rng rng(1);
    CHECK_THROWS_WITH_AS(models::generate_batch(model, {{1}, {}}, {}, rng),
                         doctest::Contains("prompt 1 is empty"), Error);
}

TEST_CASE("batched sampling with a generator per prompt: what a row draws does not depend on the rows beside it") {
    models::Llama model(testing::tiny_llama({.vocab = 96, .hidden = 32, .intermediate = 48, .layers = 2, .heads = 4,
                                             .kv_heads = 2, .context = 64}),
                        7);
    const std::vector<std::vector<std::int32_t>> prompts = {{5, 9, 13}, {5, 9, 13}, {7}, {1, 2, 3, 4}};
    const models::SampleOptions sampled{.max_new_tokens = 10, .temperature = 1.0};
    const auto rngs_for = [](std::vector<std::uint64_t> seeds) {
        std::vector<Rng> out;
        for (const auto s : seeds) out.emplace_back(s);
        return out;
    };
    auto all = rngs_for({11, 12, 13, 14});
    const models::BatchGeneration together = models::generate_batch(model, prompts, sampled, all);
    CHECK(together.completions[0] != together.completions[1]);  // one prompt, two generators: two answers
    // Each row alone, or the last two rows as another rank's share, with the same generators: the same tokens.
    for (std::size_t i = 0; i < prompts.size(); ++i) {
        auto one = rngs_for({11 + i});
        CHECK(models::generate_batch(model, {prompts[i]}, sampled, one).completions[0] == together.completions[i]);
    }
    auto share = rngs_for({13, 14});
    const auto half = models::generate_batch(model, {prompts[2], prompts[3]}, sampled, share);
    CHECK(half.completions[0] == together.completions[2]);
    CHECK(half.completions[1] == together.completions[3]);
    auto too_few = rngs_for({1});
    CHECK_THROWS_WITH_AS(models::generate_batch(model, prompts, sampled, too_few),
                         doctest::Contains("1 generators for 4 prompts"), Error);
}
