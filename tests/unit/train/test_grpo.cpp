// GRPO's pieces: advantages within groups, the clipped objective's loss and
// gradient for each loss_type (with and without the KL) against the formulas
// computed here in double, the shipped rewards and the registry's errors,
// and prompts files read in TRL's two forms with bad lines named.
#include "levers/core/error.hpp"
#include "levers/data/prompt_data.hpp"
#include "levers/train/grpo_loss.hpp"
#include "levers/train/rewards.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;

TEST_CASE("group advantages: (r - mean) / (std + 1e-4) within each group, Bessel's std; unscaled for Dr. GRPO") {
    const std::vector<double> r = {1, 0, 0, 1, 2, 2, 2, 2};
    const std::vector<double> a = train::group_advantages(r, 4, true);
    const double sd = std::sqrt(1.0 / 3.0);  // {1,0,0,1}: mean 0.5, squares 1, /3
    CHECK(a[0] == doctest::Approx(0.5 / (sd + 1e-4)));
    CHECK(a[1] == doctest::Approx(-0.5 / (sd + 1e-4)));
    for (std::size_t k = 4; k < 8; ++k) CHECK(a[k] == 0);  // a group of equal rewards teaches nothing
    const std::vector<double> raw = train::group_advantages(r, 4, false);
    CHECK(raw[0] == 0.5);
    CHECK(raw[2] == -0.5);
    CHECK_THROWS_WITH_AS(train::group_advantages(r, 3, true), doctest::Contains("8 rewards do not make groups of 3"), Error);
}

namespace {

struct Case {
    std::vector<double> logp, old, ref, mask, adv;  // [N, T] row-major but adv [N]
    std::int64_t n, t;
};

// Per-token loss and its derivative by logp, in double.
struct Expected {
    double loss = 0;
    std::vector<double> grad;
    double low = 0, high = 0, kl = 0;
};

Expected expected(const Case& c, const train::GrpoLossOptions& o, bool with_old) {
    const auto size = static_cast<std::size_t>(c.n * c.t);
    std::vector<double> per(size), dper(size);
    double tokens = 0, low = 0, high = 0, kl_sum = 0;
    for (std::size_t k = 0; k < size; ++k) {
        const double a = c.adv[k / static_cast<std::size_t>(c.t)];
        const double ratio = with_old ? std::exp(c.logp[k] - c.old[k]) : 1.0;
        const double clipped = std::clamp(ratio, 1 - o.epsilon, 1 + o.epsilon_high);
        const bool unclipped_wins = ratio * a <= clipped * a;
        const bool in_range = ratio > 1 - o.epsilon && ratio < 1 + o.epsilon_high;
        per[k] = -std::min(ratio * a, clipped * a);
        // The gradient flows where the unclipped term is the smaller, or where clipping does nothing.
        dper[k] = unclipped_wins || in_range ? -ratio * a : 0;
        if (o.beta != 0) {
            const double d = c.ref[k] - c.logp[k];
            per[k] += o.beta * (std::exp(d) - d - 1);
            dper[k] += o.beta * (1 - std::exp(d));
            kl_sum += c.mask[k] * (std::exp(d) - d - 1);
        }
        tokens += c.mask[k];
        low += c.mask[k] * (ratio < 1 - o.epsilon && a < 0);
        high += c.mask[k] * (ratio > 1 + o.epsilon_high && a > 0);
    }
    Expected e;
    e.grad.assign(size, 0);
    for (std::int64_t i = 0; i < c.n; ++i) {
        double row_tokens = 0;
        for (std::int64_t j = 0; j < c.t; ++j) row_tokens += c.mask[static_cast<std::size_t>(i * c.t + j)];
        for (std::int64_t j = 0; j < c.t; ++j) {
            const auto k = static_cast<std::size_t>(i * c.t + j);
            double scale = 0;
            switch (o.type) {
                case train::GrpoLossType::grpo: scale = 1 / (std::max(row_tokens, 1.0) * static_cast<double>(c.n)); break;
                case train::GrpoLossType::dapo: scale = 1 / (o.dapo_tokens > 0 ? o.dapo_tokens : tokens); break;
                case train::GrpoLossType::dr_grpo:
                    scale = 1 / static_cast<double>(c.n * o.max_completion_length);
                    break;
            }
            e.loss += scale * c.mask[k] * per[k];
            e.grad[k] = scale * c.mask[k] * dper[k];
        }
    }
    e.low = low / tokens;
    e.high = high / tokens;
    e.kl = kl_sum / tokens;
    return e;
}

Case make_case() {
    Case c;
    c.n = 4;
    c.t = 5;
    Rng rng(7);
    for (std::int64_t k = 0; k < c.n * c.t; ++k) {
        c.logp.push_back(-0.1 - 2.0 * rng.uniform());
        // Ratios from about 0.6 to 1.6: some inside the clip, some beyond on both sides.
        c.old.push_back(c.logp.back() + 0.5 - 1.0 * rng.uniform());
        c.ref.push_back(c.logp.back() + 0.4 - 0.8 * rng.uniform());
    }
    // Completions of 5, 3, 4 and 1 tokens (padding after).
    const std::vector<int> lengths = {5, 3, 4, 1};
    for (std::int64_t i = 0; i < c.n; ++i)
        for (std::int64_t j = 0; j < c.t; ++j) c.mask.push_back(j < lengths[static_cast<std::size_t>(i)] ? 1 : 0);
    c.adv = {1.2, -0.7, 0.3, -1.5};
    return c;
}

Tensor f32(const std::vector<double>& v, Shape shape) {
    return Tensor::from(std::vector<float>(v.begin(), v.end()), std::move(shape));
}

}  // namespace

TEST_CASE("GRPO loss and gradient: the clipped objective, each loss_type, with and without the KL, as the formulas "
          "give") {
    const Case c = make_case();
    for (const auto type : {train::GrpoLossType::grpo, train::GrpoLossType::dapo, train::GrpoLossType::dr_grpo})
        for (const double beta : {0.0, 0.04})
            for (const bool with_old : {true, false})
                for (const double dapo_tokens : {0.0, 20.0}) {
                    if (dapo_tokens > 0 && type != train::GrpoLossType::dapo) continue;
                    CAPTURE(static_cast<int>(type));
                    CAPTURE(beta);
                    CAPTURE(with_old);
                    const train::GrpoLossOptions o{.type = type, .epsilon = 0.2, .epsilon_high = 0.28, .beta = beta,
                                                   .max_completion_length = 8, .dapo_tokens = dapo_tokens};
                    const Tensor logp = f32(c.logp, {c.n, c.t}).requires_grad_();
                    const Tensor old = f32(c.old, {c.n, c.t}), ref = f32(c.ref, {c.n, c.t});
                    const train::GrpoLoss got = train::grpo_loss(logp, with_old ? &old : nullptr, &ref,
                                                                 f32(c.adv, {c.n}), f32(c.mask, {c.n, c.t}), o);
                    got.loss.backward();
                    const Expected want = expected(c, o, with_old);
                    CHECK(got.loss.item() == doctest::Approx(want.loss).epsilon(1e-5));
                    const std::vector<double> grad = logp.grad().values();
                    for (std::size_t k = 0; k < grad.size(); ++k) {
                        CAPTURE(k);
                        CHECK(grad[k] == doctest::Approx(want.grad[k]).epsilon(1e-5).scale(1e-7));
                    }
                    CHECK(got.metrics.at("clip_ratio/low_mean") == doctest::Approx(want.low));
                    CHECK(got.metrics.at("clip_ratio/high_mean") == doctest::Approx(want.high));
                    if (with_old) CHECK(want.low + want.high > 0);  // the case reaches beyond the clip
                    if (beta > 0) CHECK(got.metrics.at("kl") == doctest::Approx(want.kl).epsilon(1e-5));
                    else CHECK(got.metrics.count("kl") == 0);
                }
    // With the policy's own log-probabilities as the old ones the gradient is A ∇logp (the ratio 1).
    const train::GrpoLossOptions plain{.type = train::GrpoLossType::dapo};
    const Tensor logp = f32(c.logp, {c.n, c.t}).requires_grad_();
    train::grpo_loss(logp, nullptr, nullptr, f32(c.adv, {c.n}), f32(c.mask, {c.n, c.t}), plain).loss.backward();
    const std::vector<double> grad = logp.grad().values();
    CHECK(grad[0] == doctest::Approx(-1.2 / 13.0));  // 13 counted tokens
    CHECK(grad[5 + 3] == 0);                         // padding
    CHECK_THROWS_WITH_AS(train::grpo_loss(logp, nullptr, nullptr, f32(c.adv, {c.n}), f32(c.mask, {c.n, c.t}),
                                          {.beta = 0.1}),
                         doctest::Contains("beta 0.1 > 0 needs the reference"), Error);
    CHECK_THROWS_WITH_AS(train::grpo_loss_type("ppo"), doctest::Contains("--set loss_type=ppo: a GRPO loss type is "
                                                                         "grpo"), Error);
}

LEVERS_REWARD(ends_with_word, "1 when the answer's last word is the record's \"word\"") {
    return completion.text.ends_with(completion.field("word").get<std::string>()) ? 1.0 : 0.0;
}

TEST_CASE("rewards: the shipped ones, a project's own through LEVERS_REWARD, and names that are not registered") {
    const nlohmann::ordered_json record = {{"answer", "Moby Dick"}, {"author", "Herman Melville"}, {"word", "done"},
                                           {"n", 42}};
    const auto done = [&](std::string text, std::int64_t tokens = 3, bool stopped = true) {
        return train::Completion{.text = std::move(text), .record = &record, .tokens = tokens, .stopped = stopped};
    };
    train::RewardSettings s;
    s.answer_fields = {"answer"};
    const train::RewardFn exact = train::make_reward("exact_match", s);
    CHECK(exact(done("  Moby Dick\n")) == 1);
    CHECK(exact(done("Moby Dick.")) == 0);
    s.answer_fields = {"n"};
    CHECK(train::make_reward("exact_match", s)(done("42")) == 1);  // a number compared as JSON writes it

    s.answer_fields = {"answer", "author"};
    const train::RewardFn contains = train::make_reward("contains", s);
    CHECK(contains(done("It is moby dick, by Herman Melville.")) == 1);
    CHECK(contains(done("Moby Dick, by Mark Twain.")) == 0.5);
    CHECK(contains(done("no idea")) == 0);
    s.answer_fields = {"missing"};
    CHECK_THROWS_WITH_AS(train::make_reward("contains", s)(done("x")), doctest::Contains("the prompt's record has no \"missing\""), Error);

    s.pattern = R"(^\w+ (Dick|Sawyer)\.?$)";
    const train::RewardFn regex = train::make_reward("regex", s);
    CHECK(regex(done("Moby Dick.")) == 1);
    CHECK(regex(done("Tom Sawyer")) == 1);
    CHECK(regex(done("Moby Dick, by Melville")) == 0);
    s.pattern = "(unclosed";
    CHECK_THROWS_WITH_AS(train::make_reward("regex", s), doctest::Contains("--set reward_regex=(unclosed: PCRE2 "
                                                                            "refuses it at offset 9"), Error);

    s.max_tokens = 100;
    s.length_buffer = 20;
    const train::RewardFn length = train::make_reward("length_penalty", s);
    CHECK(length(done("", 80)) == 0);
    CHECK(length(done("", 90)) == doctest::Approx(-0.5));
    CHECK(length(done("", 100, false)) == doctest::Approx(-1));

    CHECK(train::make_reward("ends_with_word", s)(done("and we are done")) == 1);
    CHECK(train::make_reward("ends_with_word", s)(done("done, we are")) == 0);
    std::vector<std::string> names;
    for (const auto& r : train::registered_rewards()) names.push_back(r.name);
    CHECK(names == std::vector<std::string>{"contains", "ends_with_word", "exact_match", "length_penalty", "regex"});
    CHECK_THROWS_WITH_AS(train::make_reward("f1", s),
                         doctest::Contains("--set rewards=f1: no reward of that name is registered (registered: "
                                           "contains, ends_with_word, exact_match, length_penalty, regex; a project "
                                           "registers its own with LEVERS_REWARD)"),
                         Error);
    CHECK_THROWS_WITH_AS(train::register_reward("regex", "again", train::RewardFn([](const train::Completion&) {
                                                    return 0.0;
                                                })),
                         doctest::Contains("the reward regex is registered twice"), Error);
}

TEST_CASE("prompts files: text and conversations in TRL's forms, every field kept for the rewards, bad lines "
          "named") {
    testing::TempDir tmp;
    const data::BpeTokenizer tok = data::BpeTokenizer::from_tokenizer_json(testing::tiny_tokenizer_dir() / "tokenizer.json");
    const data::ChatTemplate chat = data::ChatTemplate::from_dir(testing::tiny_tokenizer_dir());
    const std::string lines = R"({"prompt": [{"role": "user", "content": "Name a color."}], "answer": "blue"})" "\n"
                              R"({"prompt": "The sky is", "answer": "blue", "n": 3})" "\n";
    const data::PromptFile file = data::read_prompt_file(tmp.write("p.jsonl", lines), tok, &chat, 64);
    REQUIRE(file.prompts.size() == 2);
    CHECK(file.conversations == 1);
    CHECK(file.texts == 1);
    const nlohmann::ordered_json messages = nlohmann::ordered_json::parse(lines.substr(0, lines.find('\n')))["prompt"];
    CHECK(file.prompts[0].ids == tok.encode(chat.render(messages, true)));
    CHECK(file.prompts[1].ids == tok.encode("The sky is", true));
    CHECK(file.prompts[1].record.at("n") == 3);
    CHECK(file.prompts[1].where.ends_with("p.jsonl line 2"));
    CHECK(file.longest == static_cast<std::int64_t>(file.prompts[0].ids.size()));

    const auto refused = [&](const std::string& text, const std::string& message, std::int64_t max_tokens = 64,
                             bool with_template = true) {
        CHECK_THROWS_WITH_AS(data::read_prompt_file(tmp.write("bad.jsonl", text), tok, with_template ? &chat : nullptr,
                                                    max_tokens),
                             doctest::Contains(message.c_str()), Error);
    };
    refused(R"({"prompt": "a"})" "\n" R"({"question": "a"})", "bad.jsonl line 2: a line needs \"prompt\"");
    refused(R"({"prompt": 5})", "bad.jsonl line 1: \"prompt\" must be text or a list of messages");
    refused("{oops", "bad.jsonl line 1: not JSON");
    refused(R"({"prompt": "one two three four five six seven eight nine ten"})", "bad.jsonl line 1: the prompt is", 4);
    refused(R"({"prompt": [{"role": "user", "content": "x"}]})", "bad.jsonl line 1: a conversation goes through the "
            "model's chat template, and its tokenizer has none", 64, false);
    refused("\n\n", "bad.jsonl has no prompts");
}
