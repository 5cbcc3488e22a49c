// Preference tuning's pieces: pairs read in TRL's two forms with only the
// answers counted, rows that keep a pair together, per-token log-probabilities
// whose gradient is the loss's, and the DPO, IPO and SimPO losses against
// their formulas computed here in double from the models' logits.
#include "levers/core/error.hpp"
#include "levers/data/preference_data.hpp"
#include "levers/kernels/reduce.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/nn/lora.hpp"
#include "levers/train/preference_loss.hpp"
#include "tests/temp_dir.hpp"
#include "tests/tiny_llama.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;
using Json = nlohmann::ordered_json;

namespace {

struct Tokenizer {
    data::BpeTokenizer tok = data::BpeTokenizer::from_tokenizer_json(testing::tiny_tokenizer_dir() / "tokenizer.json");
    data::ChatTemplate chat = data::ChatTemplate::from_dir(testing::tiny_tokenizer_dir());
};

std::string learned_text(const data::SftExample& e, const data::BpeTokenizer& tok) {
    std::vector<std::int32_t> ids;
    for (std::size_t k = 0; k < e.ids.size(); ++k)
        if (e.learned[k]) ids.push_back(e.ids[k]);
    return tok.decode(ids);
}

const std::string kPairs =
    R"({"prompt": [{"role": "user", "content": "2+2?"}, )"
    R"({"role": "assistant", "content": "Four?"}, {"role": "user", "content": "Sure?"}], )"
    R"("chosen": [{"role": "assistant", "content": "Yes, 4."}], "rejected": "No, 5."})" "\n"
    R"({"prompt": "The sky is", "chosen": " blue.", "rejected": " green."})" "\n"
    R"({"prompt": "Grass is", "chosen": " green.", "rejected": " blue, always and everywhere."})" "\n";

}  // namespace

TEST_CASE("preference pairs: conversations through the chat template and text, only the answers counted, bad "
          "lines named") {
    testing::TempDir tmp;
    const Tokenizer t;
    const data::PreferenceFile file = data::read_preference_file(tmp.write("pairs.jsonl", kPairs), t.tok, &t.chat, 64);
    REQUIRE(file.pairs.size() == 3);
    CHECK(file.conversations == 1);
    CHECK(file.texts == 2);
    const data::PreferencePair& conv = file.pairs[0];
    // The earlier assistant turn is the prompt's: only the answer and its end of turn count.
    CHECK(learned_text(conv.chosen, t.tok) == "Yes, 4.<|eot_id|>");
    CHECK(learned_text(conv.rejected, t.tok) == "No, 5.<|eot_id|>");
    const Json prompt = Json::parse(kPairs.substr(0, kPairs.find('\n')))["prompt"];
    const auto prompt_ids = t.tok.encode(t.chat.render(prompt, true));
    CHECK(conv.prompt_tokens == static_cast<std::int64_t>(prompt_ids.size()));
    CHECK(std::vector<std::int32_t>(conv.chosen.ids.begin(), conv.chosen.ids.begin() + conv.prompt_tokens) == prompt_ids);
    // Text: the prompt with the tokenizer's leading token, the answer then end of sequence.
    CHECK(learned_text(file.pairs[1].chosen, t.tok) == " blue.<|eot_id|>");
    const auto text_prompt = t.tok.encode("The sky is", true);
    CHECK(std::vector<std::int32_t>(file.pairs[1].chosen.ids.begin(),
                                    file.pairs[1].chosen.ids.begin() + file.pairs[1].prompt_tokens) == text_prompt);

    // Too long answers are cut to the context, the prompt kept.
    const data::PreferenceFile cut =
        data::read_preference_file(tmp.write("cut.jsonl", kPairs.substr(kPairs.find('\n') + 1)), t.tok, &t.chat, 8);
    CHECK(cut.truncated >= 1);
    for (const auto& p : cut.pairs) CHECK(p.chosen.ids.size() <= 9);

    const auto refused = [&](const std::string& lines, const std::string& message, std::int64_t context = 64,
                             const data::ChatTemplate* chat = nullptr) {
        const auto bad = tmp.write("bad.jsonl", lines);
        CHECK_THROWS_WITH_AS(data::read_preference_file(bad, t.tok, chat ? chat : &t.chat, context),
                             doctest::Contains(message.c_str()), Error);
    };
    const std::string ok = R"({"prompt": "a", "chosen": "b", "rejected": "c"})" "\n";
    refused(ok + R"({"prompt": "a", "chosen": "b"})", "bad.jsonl line 2: a preference pair needs \"rejected\"");
    refused(ok + R"({"chosen": "b", "rejected": "c"})", "bad.jsonl line 2: a preference pair needs \"prompt\"");
    refused(ok + R"({"prompt": "a", "chosen": "b", "rejected": "b"})",
            "bad.jsonl line 2: \"chosen\" and \"rejected\" are the same answer");
    refused(ok + "{oops", "bad.jsonl line 2: not JSON");
    refused(ok + R"({"prompt": "one two three four five six seven eight nine ten", "chosen": "b", "rejected": "c"})",
            "bad.jsonl line 2: the prompt is", 6);
    refused(R"({"prompt": [{"role": "user", "content": "x"}], "chosen": [{"role": "user", "content": "b"}], )"
            R"("rejected": "c"})",
            "line 1: \"chosen\" holds a message that is not the assistant's");
    refused("\n", "bad.jsonl has no preference pairs");
}

TEST_CASE("preference rows: a pair's answers always in one pack, packed whole or a row each") {
    testing::TempDir tmp;
    const Tokenizer t;
    const auto file = data::read_preference_file(tmp.write("pairs.jsonl", kPairs), t.tok, &t.chat, 64);
    for (const bool packing : {true, false}) {
        CAPTURE(packing);
        const data::PreferenceRows rows = data::make_preference_rows(file.pairs, 64, packing);
        CHECK(rows.pairs == 3);
        CHECK(rows.pack_start.back() == rows.rows.rows());
        if (!packing) CHECK(rows.packs() == 3);
        std::int64_t learned = 0;
        for (const auto& p : file.pairs) learned += p.chosen.learned_count() + p.rejected.learned_count();
        CHECK(rows.rows.learned() == learned);
        const data::PreferenceBatch b = data::packs_at(rows, {0, rows.packs() - 1});
        REQUIRE(b.pair.size() == b.chosen_slot.size());
        for (std::size_t k = 0; k < b.pair.size(); ++k) {
            CHECK(b.chosen_slot[k] >= 0);
            CHECK(b.rejected_slot[k] >= 0);
            CHECK(b.chosen_slot[k] != b.rejected_slot[k]);
        }
    }
    // A context holding one answer but not two: the pair becomes a pack of two rows.
    const auto& p = file.pairs[0];
    const auto longest = static_cast<std::int64_t>(std::max(p.chosen.ids.size(), p.rejected.ids.size())) - 1;
    const data::PreferenceRows tight = data::make_preference_rows({p}, longest, true);
    CHECK(tight.packs() == 1);
    CHECK(tight.rows.rows() == 2);
}

namespace {

// Each answer's summed log-probability, computed here in double from the model's logits, one sequence at a time.
std::vector<double> answer_logps(models::Llama& model, const data::SftExample& e) {
    autograd::InferenceMode inference;
    const auto n = static_cast<std::int64_t>(e.ids.size());
    const Tensor logits = model.logits(Tensor::from(e.ids, {1, n}));
    const std::vector<double> v = logits.values();
    const std::int64_t vocab = logits.dim(2);
    double sum = 0, count = 0;
    for (std::int64_t i = 0; i + 1 < n; ++i) {
        if (!e.learned[static_cast<std::size_t>(i + 1)]) continue;
        const double* row = v.data() + i * vocab;
        double top = row[0];
        for (std::int64_t j = 1; j < vocab; ++j) top = std::max(top, row[j]);
        double z = 0;
        for (std::int64_t j = 0; j < vocab; ++j) z += std::exp(row[j] - top);
        sum += row[e.ids[static_cast<std::size_t>(i + 1)]] - top - std::log(z);
        count += 1;
    }
    return {sum, count};
}

double log_sigmoid(double x) { return -std::log1p(std::exp(-x)); }

models::Llama tiny(std::uint64_t seed) {
    return models::Llama(testing::tiny_llama({.vocab = testing::kTinyTokenizerVocab, .hidden = 16, .intermediate = 32,
                                              .layers = 2, .heads = 2, .kv_heads = 1, .context = 64}),
                         seed);
}

}  // namespace

TEST_CASE("token log-probabilities: the answers' only, and their gradient that of the cross-entropy they equal") {
    testing::TempDir tmp;
    const Tokenizer t;
    const auto file = data::read_preference_file(tmp.write("pairs.jsonl", kPairs), t.tok, &t.chat, 64);
    models::Llama model = tiny(3);
    const data::PreferenceRows rows = data::make_preference_rows(file.pairs, 64, true);
    const data::PreferenceBatch b = data::packs_at(rows, {0});
    const Tensor lp = model.token_logprobs(b.rows.tokens, b.rows.targets, &b.rows.documents);
    const train::PairLogps s = train::pair_logps(lp, b);
    const std::vector<double> chosen = s.chosen.values(), counts = s.chosen_tokens.values();
    for (std::size_t k = 0; k < b.pair.size(); ++k) {
        const auto want = answer_logps(model, file.pairs[static_cast<std::size_t>(b.pair[k])].chosen);
        CHECK(chosen[k] == doctest::Approx(want[0]).epsilon(1e-5));
        CHECK(counts[k] == want[1]);
    }
    // d(Σ log p) = -d(N · mean cross-entropy), for every weight.
    ops::sum(lp).backward();
    const std::vector<double> grads = model.params().grads().values();
    model.params().zero_grad();
    const double n = static_cast<double>(b.rows.targets.numel()) -
                     static_cast<double>(std::count(b.rows.targets.data<std::int32_t>(),
                                                    b.rows.targets.data<std::int32_t>() + b.rows.targets.numel(), -100));
    (model.loss(b.rows.tokens, b.rows.targets, b.rows.documents) * -n).backward();
    const std::vector<double> want = model.params().grads().values();
    REQUIRE(grads.size() == want.size());
    double worst = 0, largest = 0;
    for (std::size_t k = 0; k < want.size(); ++k) {
        worst = std::max(worst, std::abs(grads[k] - want[k]));
        largest = std::max(largest, std::abs(want[k]));
    }
    CHECK(largest > 0);
    CHECK(worst <= 1e-5 * largest);
}

TEST_CASE("DPO, IPO and SimPO losses: log 2 where the policy is its reference, the formulas where it is not") {
    testing::TempDir tmp;
    const Tokenizer t;
    const auto file = data::read_preference_file(tmp.write("pairs.jsonl", kPairs), t.tok, &t.chat, 64);
    models::Llama policy = tiny(3), reference = tiny(4);
    const data::PreferenceRows rows = data::make_preference_rows(file.pairs, 64, true);
    std::vector<std::int64_t> all;
    for (std::int64_t k = 0; k < rows.packs(); ++k) all.push_back(k);
    const data::PreferenceBatch b = data::packs_at(rows, all);
    const auto score = [&](models::Llama& m) {
        return train::pair_logps(m.token_logprobs(b.rows.tokens, b.rows.targets, &b.rows.documents), b);
    };
    const train::PairLogps mine = score(policy);
    train::PairLogps ref;
    {
        autograd::InferenceMode inference;
        ref = score(reference);
    }
    // Per pair, in double: policy and reference, chosen and rejected, sums and lengths.
    struct Numbers { double pc, pr, rc, rr, nc, nr; };
    std::vector<Numbers> want;
    for (const std::int64_t p : b.pair) {
        const auto& pair = file.pairs[static_cast<std::size_t>(p)];
        const auto a = answer_logps(policy, pair.chosen), c = answer_logps(policy, pair.rejected);
        const auto x = answer_logps(reference, pair.chosen), y = answer_logps(reference, pair.rejected);
        want.push_back({a[0], c[0], x[0], y[0], a[1], c[1]});
    }
    const double beta = 0.3, eps = 0.1, gamma = 0.7;
    const auto mean = [&](auto f) {
        double s = 0;
        for (const Numbers& w : want) s += f(w);
        return s / static_cast<double>(want.size());
    };
    using train::PreferenceLossType;
    const double dpo = mean([&](const Numbers& w) {
        const double z = beta * ((w.pc - w.pr) - (w.rc - w.rr));
        return -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
    });
    const auto got = train::preference_loss(mine, &ref, {.type = PreferenceLossType::sigmoid, .beta = beta,
                                                         .label_smoothing = eps});
    CHECK(got.loss.item() == doctest::Approx(dpo).epsilon(1e-5));
    CHECK(got.metrics.at("rewards/chosen") == doctest::Approx(mean([&](const Numbers& w) { return beta * (w.pc - w.rc); })).epsilon(1e-5));
    CHECK(got.metrics.at("logps/rejected") == doctest::Approx(mean([&](const Numbers& w) { return w.pr; })).epsilon(1e-5));
    const double ipo = mean([&](const Numbers& w) {
        const double z = (w.pc / w.nc - w.pr / w.nr) - (w.rc / w.nc - w.rr / w.nr);
        return (z - 1 / (2 * beta)) * (z - 1 / (2 * beta));
    });
    CHECK(train::preference_loss(mine, &ref, {.type = PreferenceLossType::ipo, .beta = beta}).loss.item() ==
          doctest::Approx(ipo).epsilon(1e-5));
    const double simpo = mean([&](const Numbers& w) {
        const double z = beta * (w.pc / w.nc - w.pr / w.nr - gamma / beta);
        return -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
    });
    CHECK(train::preference_loss(mine, nullptr, {.type = PreferenceLossType::simpo, .beta = beta,
                                                 .label_smoothing = eps, .gamma = gamma}).loss.item() ==
          doctest::Approx(simpo).epsilon(1e-5));

    // LoRA's reference is the base with its adapters off: at the start (B = 0) the same numbers, so log 2.
    nn::attach_lora(policy, 2, 4, 1, {"q_proj", "v_proj"});
    for (auto& [name, p] : policy.named_parameters())  // the adapters moved off zero: policy and base differ
        if (name.ends_with("lora_b")) p->value().fill_(0.05);
    const train::PairLogps adapted = score(policy);
    train::PairLogps base;
    {
        autograd::InferenceMode inference;
        nn::AdaptersOff off(policy);
        base = score(policy);
    }
    CHECK(train::preference_loss(base, &base, {}).loss.item() == doctest::Approx(std::log(2.0)).epsilon(1e-6));
    CHECK(std::abs(train::preference_loss(adapted, &base, {}).loss.item() - std::log(2.0)) > 1e-4);
    const std::vector<double> unadapted = mine.chosen.values(), off = base.chosen.values();
    for (std::size_t k = 0; k < off.size(); ++k) CHECK(off[k] == doctest::Approx(unadapted[k]).epsilon(1e-5));
    CHECK_THROWS_WITH_AS(train::preference_loss_type("kto"), doctest::Contains("sigmoid (DPO), ipo or simpo"), Error);
}
