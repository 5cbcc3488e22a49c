#include "levers/app/tokenize_command.hpp"

#include "levers/app/command.hpp"
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/chat_template.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>
#include <iterator>

namespace levers {

namespace {
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

data::BpeTokenizer load(const fs::path& where) {
    LEVERS_CHECK(fs::exists(where), "--tokenizer {}: no such file or directory (a model's directory, or its "
                 "tokenizer.json)", where.string());
    if (fs::is_regular_file(where)) return data::BpeTokenizer::from_tokenizer_json(where);
    if (fs::exists(where / "tokenizer.json")) return data::BpeTokenizer::from_tokenizer_json(where / "tokenizer.json");
    if (fs::exists(where / "vocab.json") && fs::exists(where / "merges.txt"))
        return data::BpeTokenizer::from_files(where / "vocab.json", where / "merges.txt");
    LEVERS_FAIL("--tokenizer {}: the directory has neither tokenizer.json nor GPT-2's vocab.json and merges.txt",
                where.string());
}

std::string read_input(const std::string& input) {
    if (input.empty() || input == "-")
        return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    LEVERS_CHECK(fs::is_regular_file(input), "{}: no such file", input);
    return read_file(input);
}

Json parse(const std::string& text, const std::string& what) {
    try {
        return Json::parse(text);
    } catch (const Json::exception&) {
        LEVERS_FAIL("{} is not JSON", what);
    }
}
}  // namespace

int tokenize(const TokenizeFlags& f) {
    LEVERS_CHECK(!(f.decode && f.chat), "--decode and --chat do not go together: --chat renders a conversation to ids");
    LEVERS_CHECK(f.chat || (!f.generation_prompt && !f.render_only),
                 "--generation-prompt and --render go with --chat");
    const fs::path where(f.tokenizer);
    const std::string what = f.input.empty() || f.input == "-" ? "the input" : f.input;
    // The chat template first: a directory without one is refused before any tokenizer is read.
    if (f.chat) {
        LEVERS_CHECK(fs::is_directory(where), "--chat needs --tokenizer to be a model's directory (its chat template "
                     "is in tokenizer_config.json or chat_template.jinja); {} is not one", where.string());
        const data::ChatTemplate chat = data::ChatTemplate::from_dir(where);
        Json messages = parse(read_input(f.input), what);
        if (messages.is_object() && messages.contains("messages")) messages = messages["messages"];
        data::check_messages(messages, what);
        const std::string text = chat.render(messages, f.generation_prompt);
        if (f.render_only) {
            fmt::print("{}", text);
            return 0;
        }
        fmt::print("{}\n", Json(load(where).encode(text)).dump());
        return 0;
    }
    const data::BpeTokenizer tokenizer = load(where);
    const std::string input = read_input(f.input);
    if (f.decode) {
        const Json ids = parse(input, what);
        LEVERS_CHECK(ids.is_array() && std::all_of(ids.begin(), ids.end(), [](const Json& x) { return x.is_number_integer(); }),
                     "{} must be a JSON array of token ids", what);
        fmt::print("{}", tokenizer.decode(ids.get<std::vector<std::int32_t>>(), f.skip_special));
        return 0;
    }
    fmt::print("{}\n", Json(tokenizer.encode(input, f.add_special)).dump());
    return 0;
}

namespace {

class TokenizeCommand final : public Command {
public:
    void add_to(CLI::App& app, const Examples& ex) override {
        auto* tok = command_ = app.add_subcommand("tokenize", "Text to token ids with a model's tokenizer, ids to "
                                                              "text, or a conversation through its chat template");
        tok->add_option("--tokenizer", flags_.tokenizer, "a model's directory (tokenizer.json, or GPT-2's vocab.json "
                                                         "and merges.txt) or a tokenizer.json")
            ->required();
        tok->add_option("input", flags_.input, "a file (default: stdin)");
        tok->add_flag("--decode", flags_.decode, "the input is a JSON array of ids: print their text");
        tok->add_flag("--chat", flags_.chat, "the input is a conversation (a JSON list of {role, content}, or "
                                             "{\"messages\": [...]}): render it through the directory's chat "
                                             "template, then tokenize");
        tok->add_flag("--generation-prompt", flags_.generation_prompt,
                      "with --chat: end with the assistant's turn opened");
        tok->add_flag("--render", flags_.render_only, "with --chat: print the rendered text, not its ids");
        tok->add_flag("--add-special", flags_.add_special, "add the tokenizer's own tokens around plain text (its BOS)");
        tok->add_flag("--skip-special", flags_.skip_special, "with --decode: leave special tokens out");
        tok->footer(ex("\nExamples:\n  {recipe} tokenize --tokenizer ~/models/Llama-3.2-1B-Instruct notes.txt\n"
                       "  echo '[9906, 1917]' | {recipe} tokenize --tokenizer ~/models/Llama-3.2-1B-Instruct "
                       "--decode\n"
                       "  {recipe} tokenize --tokenizer ~/models/Qwen3-0.6B --chat --render conversation.json"));
    }
    int run(int, char**) override { return tokenize(flags_); }

private:
    TokenizeFlags flags_;
};

}  // namespace

std::unique_ptr<Command> tokenize_command() { return std::make_unique<TokenizeCommand>(); }

}  // namespace levers
