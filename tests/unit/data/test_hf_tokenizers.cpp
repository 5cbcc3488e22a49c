// Hugging Face tokenizer.json tokenizers (Llama 3 and Qwen 3: byte-level BPE
// after a regex split, Qwen with NFC; Llama 2 and Gemma 3: SentencePiece-style
// BPE with byte fallback, Gemma's without a ▁ in front and with 6,415 added
// tokens) against an independent implementation: the ids
// @lenml/tokenizers (JavaScript) gives for hard text
// (tests/reference/tokenizers/: the texts, the script, its output).
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "tests/installed_data.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <map>

using namespace levers;
using data::BpeTokenizer;

namespace {

const BpeTokenizer& tokenizer(const std::string& name) {
    static std::map<std::string, BpeTokenizer> made;
    if (!made.contains(name))
        made.emplace(name, BpeTokenizer::from_tokenizer_json(data::data_dir() / "tokenizers" / name / "tokenizer.json"));
    return made.at(name);
}

nlohmann::json tokenizer_reference(const char* file) {
    return nlohmann::json::parse(read_file(testing::source_path("tests/reference/tokenizers") / file));
}

}  // namespace

TEST_CASE("Llama 3, Qwen 3, Llama 2 and Gemma 3 tokenizers encode hard text as an independent implementation does" *
          testing::needs({testing::Data::hf_tokenizers})) {
    const auto texts = tokenizer_reference("texts.json").get<std::vector<std::string>>();
    const auto ids = tokenizer_reference("ids.json");
    for (const char* name : {"llama3", "qwen3", "llama2", "gemma3"}) {
        CAPTURE(name);
        const BpeTokenizer& tok = tokenizer(name);
        for (std::size_t i = 0; i < texts.size(); ++i) {
            CAPTURE(texts[i]);
            const auto want = ids[name]["plain"][i].get<std::vector<std::int32_t>>();
            CHECK(tok.encode(texts[i]) == want);
        }
        CHECK(tok.encode(texts[0], true) == ids[name]["with_special"].get<std::vector<std::int32_t>>());
    }
}

TEST_CASE("tokenizer.json tokenizers decode what they encode; special tokens are one token and can be skipped" *
          testing::needs({testing::Data::hf_tokenizers})) {
    const auto texts = tokenizer_reference("texts.json").get<std::vector<std::string>>();
    for (const char* name : {"llama3", "qwen3", "llama2", "gemma3"}) {
        CAPTURE(name);
        const BpeTokenizer& tok = tokenizer(name);
        for (const std::string& text : texts) {
            CAPTURE(text);
            const std::string back = tok.decode(tok.encode(text));
            if (std::string(name) == "qwen3")  // NFC composes the decomposed accents: compare with the composed text
                CHECK(back == data::BpeTokenizer::from_tokenizer_json(data::data_dir() / "tokenizers/qwen3/tokenizer.json")
                                  .decode(tok.encode(back)));
            else if (std::string(name) == "llama2" && text.find("<s>") != std::string::npos)
                // Text after an added token gets its own ▁ in front, as in Hugging Face's tokenizers: "<s>x" -> "<s> x".
                CHECK(back.find("<s> x</s>") != std::string::npos);
            else
                CHECK(back == text);
        }
    }
    const BpeTokenizer& llama3 = tokenizer("llama3");
    CHECK(llama3.vocab_size() == 128256);
    CHECK(llama3.token_id("<|eot_id|>") == 128009);
    CHECK(llama3.encode("a<|eot_id|>b") == std::vector<std::int32_t>{64, 128009, 65});
    CHECK(llama3.is_special(128009));
    CHECK(llama3.decode({64, 128009, 65}, true) == "ab");
    CHECK(llama3.decode({64, 128009, 65}) == "a<|eot_id|>b");
    const BpeTokenizer& qwen3 = tokenizer("qwen3");
    CHECK(qwen3.encode("cafe\u0301") == qwen3.encode("caf\u00e9"));  // NFC
    CHECK_THROWS_WITH_AS(llama3.decode({128256}), doctest::Contains("token id 128256 is outside the vocabulary"), Error);
    CHECK_THROWS_WITH_AS(llama3.encode("ok \xff\xfe"), doctest::Contains("not valid UTF-8"), Error);
}

TEST_CASE("a book encodes fast and round-trips with each tokenizer" *
          testing::needs({testing::Data::hf_tokenizers, testing::Data::books})) {
    const std::string text = read_file(data::data_dir() / "books" / "pg1661.txt").substr(0, 200000);
    for (const char* name : {"llama3", "qwen3", "llama2", "gemma3"}) {
        CAPTURE(name);
        const BpeTokenizer& tok = tokenizer(name);
        const auto start = std::chrono::steady_clock::now();
        const auto ids = tok.encode(text);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        CHECK(ids.size() < text.size() / 3);
        CHECK(tok.decode(ids) == text);
        CHECK(seconds < 5.0);  // ~0.2 s here; a quadratic merge would take minutes
    }
}

TEST_CASE("an unsupported tokenizer.json is refused naming the part and what levers reads") {
    testing::TempDir dir;
    const auto write = [&](const char* name, const nlohmann::json& j) { return dir.write(name, j.dump()); };
    const nlohmann::json bpe = {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}, {"ab", 2}}}, {"merges", {"a b"}}};
    struct Case {
        std::filesystem::path file;
        const char* message;
    };
    const Case cases[] = {
        {write("wordpiece.json", {{"model", {{"type", "WordPiece"}, {"vocab", {{"a", 0}}}}}}),
         "model type \"WordPiece\" is not supported; levers reads BPE"},
        {write("whitespace.json", {{"model", bpe}, {"pre_tokenizer", {{"type", "Whitespace"}}}}),
         "pre-tokenizer Whitespace is not supported; levers reads ByteLevel, Split (a regex) then ByteLevel, Metaspace"},
        {write("nfkc.json", {{"model", bpe}, {"normalizer", {{"type", "NFKC"}}}}), "normalizer {\"type\":\"NFKC\"} is not supported"},
        {write("wordpiece_decoder.json", {{"model", bpe}, {"decoder", {{"type", "WordPiece"}}}}),
         "decoder WordPiece is not supported"},
        {write("bad_merge.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", {"a b"}}}}}),
         "merge 1 'a b' joins tokens that are not all in the vocabulary"},
        {dir.write("not_json.json", "{"), "not a tokenizer.json"},
        {write("merge_no_space.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", {"ab"}}}}}),
         "merge 'ab' is not 'left right'"},
        {write("merge_number.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", {7}}}}}),
         "merge '7' is not 'left right'"},
        {write("merge_triple.json",
               {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}, {"merges", {{"a", "b", "c"}}}}}}),
         "merge 'a list of 3 items' is not 'left right'"},
        {write("negative_id.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", -1}}}, {"merges", {"a b"}}}}}),
         "token 'a' has id -1, expected an integer >= 0"},
        {write("no_merges.json", {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}}}}}}),
         "a BPE model needs \"vocab\" and \"merges\""},
        {write("prepend_alone.json",
               {{"model", bpe}, {"normalizer", {{"type", "Prepend"}, {"prepend", "\u2581"}}}}),
         "a Prepend(\"▁\") normalizer without Replace(\" \", \"▁\") is not supported"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.file);
        CHECK_THROWS_WITH_AS(BpeTokenizer::from_tokenizer_json(c.file), doctest::Contains(c.message), Error);
        CHECK_THROWS_WITH_AS(BpeTokenizer::from_tokenizer_json(c.file), doctest::Contains(c.file.filename().string().c_str()),
                             Error);
    }
    // A minimal SentencePiece-style one works: a ▁ in front, merges, unknown characters as bytes.
    const auto file = write("tiny.json", {{"model", {{"type", "BPE"},
                                                     {"vocab", {{"\u2581", 0}, {"a", 1}, {"\u2581a", 2}, {"<0x21>", 3}}},
                                                     {"merges", {"\u2581 a"}},
                                                     {"byte_fallback", true}}},
                                          {"normalizer", {{"type", "Sequence"},
                                                          {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}},
                                                                           {{"type", "Replace"},
                                                                            {"pattern", {{"String", " "}}},
                                                                            {"content", "\u2581"}}}}}}});
    const BpeTokenizer tiny = BpeTokenizer::from_tokenizer_json(file);
    CHECK(tiny.encode("a a!") == std::vector<std::int32_t>{2, 2, 3});
    CHECK(tiny.decode({2, 2, 3}) == "a a!");
    // Merges written as pairs (["▁", "a"], as newer tokenizers write them) read as the same merges.
    nlohmann::json pairs = nlohmann::json::parse(read_file(file));
    pairs["model"]["merges"] = nlohmann::json::array({nlohmann::json::array({"\u2581", "a"})});
    const BpeTokenizer from_pairs = BpeTokenizer::from_tokenizer_json(write("pairs.json", pairs));
    CHECK(from_pairs.spec().merges == tiny.spec().merges);
    CHECK(from_pairs.encode("a a!") == std::vector<std::int32_t>{2, 2, 3});
    CHECK(from_pairs.spec().unk == tiny.spec().unk);
}
