// Supervised fine-tuning data: which tokens of a conversation are learned
// (the assistant's turns and their end, through the real Llama 3 and Qwen 3
// templates), rows packed with padding, the bad lines named, and the loss
// of a packed step equal to its examples' run one by one.
#include "levers/core/error.hpp"
#include "levers/data/files.hpp"
#include "levers/data/sft_rows.hpp"
#include "levers/models/hf_dir.hpp"
#include "tests/installed_data.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace levers;
using Json = nlohmann::ordered_json;

namespace {

std::filesystem::path tokenizer_dir(const char* name) { return data::data_dir() / "tokenizers" / name; }

// The learned tokens of an example, decoded one run at a time.
std::vector<std::string> learned_runs(const data::SftExample& e, const data::BpeTokenizer& tok) {
    std::vector<std::string> out;
    std::vector<std::int32_t> run;
    for (std::size_t k = 0; k <= e.ids.size(); ++k) {
        if (k < e.ids.size() && e.learned[k]) {
            run.push_back(e.ids[k]);
        } else if (!run.empty()) {
            out.push_back(tok.decode(run));
            run.clear();
        }
    }
    return out;
}

const Json kConversation = Json::parse(R"([
    {"role": "system", "content": "You add."},
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "Thanks"},
    {"role": "assistant", "content": "Welcome."}])");

}  // namespace

TEST_CASE("sft learns the assistant's turns and their end of turn, as the chat template renders them" *
          testing::needs({testing::Data::hf_tokenizers})) {
    struct Want {
        const char* tokenizer;
        std::vector<std::string> runs;
    };
    for (const Want& w : {Want{"llama3", {"4.<|eot_id|>", "Welcome.<|eot_id|>"}},
                          Want{"qwen3", {"4.<|im_end|>", "<think>\n\n</think>\n\nWelcome.<|im_end|>"}}}) {
        CAPTURE(w.tokenizer);
        const auto tok = data::BpeTokenizer::from_tokenizer_json(tokenizer_dir(w.tokenizer) / "tokenizer.json");
        const auto chat = data::ChatTemplate::from_dir(tokenizer_dir(w.tokenizer));
        const data::SftExample e =
            data::encode_conversation(kConversation, tok, chat, data::end_of_turn(tok, chat), "test");
        CHECK(learned_runs(e, tok) == w.runs);
        // Tokenized piece by piece, the same ids as the whole text at once.
        CHECK(e.ids == tok.encode(chat.render(kConversation, false)));
    }
}

TEST_CASE("sft data files: the three forms read, and every bad line named with its number" *
          testing::needs({testing::Data::hf_tokenizers})) {
    testing::TempDir tmp;
    const auto tok = data::BpeTokenizer::from_tokenizer_json(tokenizer_dir("qwen3") / "tokenizer.json");
    const auto chat = data::ChatTemplate::from_dir(tokenizer_dir("qwen3"));
    const auto file = tmp.write("ok.jsonl", Json{{"messages", kConversation}}.dump() + "\n\n" +
                                                R"({"instruction": "Add 2 and 2.", "input": "", "output": "4"})" "\n" +
                                                R"({"text": "Plain text."})" "\n");
    const data::SftFile read = data::read_sft_file(file, tok, &chat);
    CHECK(read.examples.size() == 3);
    CHECK(read.conversations == 1);
    CHECK(read.instructions == 1);
    CHECK(read.texts == 1);
    CHECK(learned_runs(read.examples[1], tok) == std::vector<std::string>{"<think>\n\n</think>\n\n4<|im_end|>"});
    CHECK(read.examples[2].learned_count() == static_cast<std::int64_t>(read.examples[2].ids.size()) - 1);

    const auto refused = [&](const std::string& lines, const std::string& message, const data::ChatTemplate* c) {
        const auto bad = tmp.write("bad.jsonl", lines);
        CHECK_THROWS_WITH_AS(data::read_sft_file(bad, tok, c), doctest::Contains(message.c_str()), Error);
    };
    const std::string ok = R"({"text": "fine"})" "\n";
    refused(ok + "{oops\n", "bad.jsonl line 2: not JSON", &chat);
    refused(ok + R"({"prompt": "x"})" "\n", "bad.jsonl line 2: an example is {\"messages\": [...]}", &chat);
    refused(R"({"messages": [{"role": "bot", "content": "x"}]})", "bad.jsonl line 1: message 1 has the role \"bot\"", &chat);
    refused(R"({"messages": [{"role": "user", "content": "x"}]})",
            "bad.jsonl line 1: the conversation has no assistant turn to learn from", &chat);
    refused(R"({"instruction": "x"})", "bad.jsonl line 1: an instruction needs \"output\"", &chat);
    refused(R"({"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}]})",
            "line 1: conversations and instructions go through the model's chat template, and its tokenizer has none",
            nullptr);
    refused("\n  \n", "bad.jsonl has no examples", &chat);
}

TEST_CASE("sft rows: examples packed end to end as documents, padding learned by nothing, too long dropped or cut") {
    const auto example = [](std::int32_t first, int n, std::vector<std::uint8_t> learned) {
        data::SftExample e;
        for (int i = 0; i < n; ++i) e.ids.push_back(first + i);
        e.learned = std::move(learned);
        return e;
    };
    // 4 tokens (3 positions, the last two learned), 3 tokens (2 positions, one learned), 9 tokens (too long for 6).
    const std::vector<data::SftExample> examples = {example(10, 4, {0, 0, 1, 1}), example(20, 3, {0, 1, 0}),
                                                    example(30, 9, {1, 1, 1, 1, 1, 1, 1, 1, 1})};
    const data::SftRows packed = data::make_rows(examples, 6, true, data::TooLong::drop);
    CHECK(packed.rows() == 1);
    CHECK(packed.dropped == 1);
    CHECK(packed.tokens == std::vector<std::int32_t>{10, 11, 12, 20, 21, 0});
    CHECK(packed.targets == std::vector<std::int32_t>{-100, 12, 13, 21, -100, -100});
    CHECK(packed.documents == std::vector<std::int32_t>{1, 1, 1, 2, 2, 3});
    CHECK(packed.learned() == 3);
    const data::SftRows apart = data::make_rows(examples, 6, false, data::TooLong::truncate);
    CHECK(apart.rows() == 3);
    CHECK(apart.truncated == 1);
    CHECK(std::vector<std::int32_t>(apart.tokens.begin() + 12, apart.tokens.end()) ==
          std::vector<std::int32_t>{30, 31, 32, 33, 34, 35});
    CHECK(std::vector<std::int32_t>(apart.targets.begin(), apart.targets.begin() + 6) ==
          std::vector<std::int32_t>{-100, 12, 13, -100, -100, -100});
    // Fewer rows than a step takes: each step takes them again, and the note says so.
    data::SftBatches twice(packed, 2, 1, 1, 0);
    CHECK(twice.next().tokens.shape() == Shape{2, 6});
    CHECK(data::repeated_rows_note(packed, 2, 1) ==
          "1 row of 6 positions, fewer than a step's 2 (2 per rank x 1 rank): each step takes them more than once, "
          "epoch after epoch (a smaller batch_size repeats them less)");
    CHECK(data::repeated_rows_note(apart, 1, 3).empty());
}

TEST_CASE("the loss of a packed sft step equals its examples' run one by one, weighted by their learned tokens") {
    const auto dir = testing::source_path("tests/reference/hf/qwen3");
    auto packed = models::load_hf_model(dir, Device::cpu(), DType::f64);
    auto alone = models::load_hf_model(dir, Device::cpu(), DType::f64);
    std::vector<data::SftExample> examples;
    for (int k = 0; k < 5; ++k) {
        data::SftExample e;
        const int n = 4 + 3 * k % 7;
        for (int i = 0; i < n; ++i) {
            e.ids.push_back((k * 11 + i * 7 + 2) % 64);
            e.learned.push_back(i >= n / 2 ? 1 : 0);
        }
        examples.push_back(e);
    }
    const data::SftRows rows = data::make_rows(examples, 16, true, data::TooLong::drop);
    REQUIRE(rows.rows() > 1);  // several rows, some examples sharing one, padding after them
    std::vector<std::int64_t> all;
    for (std::int64_t r = 0; r < rows.rows(); ++r) all.push_back(r);
    const data::SftBatch b = data::rows_at(rows, all);
    const Tensor loss = packed->loss(b.tokens, b.targets, b.documents);
    double total = 0;
    for (const data::SftExample& e : examples) {
        const auto n = static_cast<std::int64_t>(e.ids.size()) - 1;
        std::vector<std::int32_t> inputs(e.ids.begin(), e.ids.end() - 1), targets;
        for (std::int64_t i = 0; i < n; ++i)
            targets.push_back(e.learned[static_cast<std::size_t>(i + 1)] ? e.ids[static_cast<std::size_t>(i + 1)] : -100);
        total += alone->loss(Tensor::from(inputs, {1, n}), Tensor::from(targets, {1, n})).item() *
                 static_cast<double>(e.learned_count());
    }
    CHECK(std::abs(loss.item() - total / static_cast<double>(rows.learned())) < 1e-12);
}
