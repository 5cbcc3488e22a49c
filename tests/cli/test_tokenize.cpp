// `recipe tokenize` through the real binary: text to ids and back as the
// library does, a conversation through a chat template as Hugging Face
// renders it (tests/reference/chat/rendered.json), and bad input refused
// with one line and exit 2.
#include "levers/core/read_file.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/files.hpp"
#include "tests/installed_data.hpp"
#include "tests/process.hpp"
#include "tests/source_tree.hpp"
#include "tests/temp_dir.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace levers;
using namespace levers::testing;
using Json = nlohmann::ordered_json;

namespace {
std::string tokenizer_dir(const char* name) { return (data::data_dir() / "tokenizers" / name).string(); }
}  // namespace

TEST_CASE("recipe tokenize: text to ids and back as the tokenizer does, a conversation as Hugging Face renders it" *
          needs({Data::hf_tokenizers})) {
    TempDir tmp;
    const std::string text = "Packed rows don't cross documents: 12,345 tokens, 中文, émigré.\r\n";
    const auto file = tmp.write("text.txt", text);
    const auto tokenizer = data::BpeTokenizer::from_tokenizer_json(tokenizer_dir("llama3") + "/tokenizer.json");
    Ran r = run_recipe({"tokenize", "--tokenizer", tokenizer_dir("llama3"), file.string()});
    REQUIRE(r.code == 0);
    const auto ids = Json::parse(r.output).get<std::vector<std::int32_t>>();
    CHECK(ids == tokenizer.encode(text));
    r = run_recipe({"tokenize", "--tokenizer", tokenizer_dir("llama3") + "/tokenizer.json", "--add-special", file.string()});
    REQUIRE(r.code == 0);
    CHECK(Json::parse(r.output).get<std::vector<std::int32_t>>() == tokenizer.encode(text, true));
    r = run_recipe({"tokenize", "--tokenizer", tokenizer_dir("llama3"), "--decode",
                    tmp.write("ids.json", Json(ids).dump()).string()});
    REQUIRE(r.code == 0);
    CHECK(r.output == text);

    // The reference's first conversation through Qwen 3's template, as text and as ids.
    const Json conversations = Json::parse(read_file(source_path("tests/reference/chat/conversations.json")));
    std::string want;
    for (const Json& x : Json::parse(read_file(source_path("tests/reference/chat/rendered.json"))))
        if (x["template"] == "qwen3" && x["case"] == conversations[0]["name"]) want = x["text"];
    REQUIRE(!want.empty());
    const auto chat = tmp.write("chat.json", Json{{"messages", conversations[0]["messages"]}}.dump());
    r = run_recipe({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--chat", "--generation-prompt", "--render",
                    chat.string()});
    REQUIRE(r.code == 0);
    CHECK(r.output == want);
    r = run_recipe({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--chat", "--generation-prompt", chat.string()});
    REQUIRE(r.code == 0);
    const auto qwen = data::BpeTokenizer::from_tokenizer_json(tokenizer_dir("qwen3") + "/tokenizer.json");
    CHECK(Json::parse(r.output).get<std::vector<std::int32_t>>() == qwen.encode(want));
}

TEST_CASE("recipe tokenize refuses bad input with one line and exit 2" * needs({Data::hf_tokenizers})) {
    TempDir tmp;
    const auto chat = tmp.write("chat.json", R"([{"role": "user", "content": "Hi"}])");
    const auto refused = [](const std::vector<std::string>& args, const std::string& line) {
        const Ran r = run_recipe(args);
        INFO(r.output);
        CHECK(r.code == 2);
        CHECK(r.output == "error: " + line + "\n");
    };
    refused({"tokenize", "--tokenizer", tokenizer_dir("llama2"), "--chat", chat.string()},
            tokenizer_dir("llama2") + " has no chat template (neither chat_template.jinja nor a chat_template in "
                                      "tokenizer_config.json): a base model's tokenizer, not a chat model's");
    refused({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--chat",
             tmp.write("bad.json", R"([{"role": "bot", "content": "Hi"}])").string()},
            tmp.path().string() + "/bad.json: message 1 has the role \"bot\"; roles are system, user, assistant and tool");
    refused({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--decode", tmp.write("ids.json", "[1, oops]").string()},
            tmp.path().string() + "/ids.json is not JSON");
    refused({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--decode", tmp.write("ids2.json", "[1, 2.5]").string()},
            tmp.path().string() + "/ids2.json must be a JSON array of token ids");
    refused({"tokenize", "--tokenizer", (tmp.path() / "nowhere").string(), chat.string()},
            "--tokenizer " + (tmp.path() / "nowhere").string() +
                ": no such file or directory (a model's directory, or its tokenizer.json)");
    refused({"tokenize", "--tokenizer", tmp.path().string(), chat.string()},
            "--tokenizer " + tmp.path().string() +
                ": the directory has neither tokenizer.json nor GPT-2's vocab.json and merges.txt");
}
