// chat: talk to a Hugging Face chat model (Llama, Mistral, Qwen, or what sft
// saved): each user turn (--set prompt=, else one per line of stdin, the
// terminal's or a pipe's) goes into the conversation, which the model's chat
// template renders with the generation prompt; the answer is generated
// through the KV cache until the template's end of turn (or the config's end
// tokens), printed, and kept in the conversation for the next turn.
// --set questions=FILE.jsonl answers many conversations instead, each on its
// own (sft's chat form; a last assistant turn, the reference, is left out),
// printing one JSON line {"answer": ...} per conversation.
#include "levers/core/rng.hpp"
#include "levers/data/sft_data.hpp"
#include "levers/distributed/context.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/hf_dir.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

namespace {

using namespace levers;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

// The conversations of a questions file, each up to its last user turn.
std::vector<Json> read_questions(const fs::path& path) {
    std::ifstream in(path);
    LEVERS_CHECK(in, "--set questions={}: cannot read it (one {{\"messages\": [...]}} per line)", path.string());
    std::vector<Json> out;
    std::string line;
    for (long number = 1; std::getline(in, line); ++number) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = fmt::format("{} line {}", path.filename().string(), number);
        Json record;
        try {
            record = Json::parse(line);
        } catch (const nlohmann::json::exception&) {
            LEVERS_FAIL("{}: not JSON (one {{\"messages\": [...]}} per line)", where);
        }
        LEVERS_CHECK(record.is_object() && record.contains("messages"), "{}: no \"messages\" list", where);
        Json messages = record["messages"];
        data::check_messages(messages, where);
        if (messages.back()["role"] == "assistant") messages.erase(messages.size() - 1);
        LEVERS_CHECK(!messages.empty() && messages.back()["role"] == "user", "{}: the conversation must end with a "
                     "user turn (or a user turn and its reference answer)", where);
        out.push_back(std::move(messages));
    }
    LEVERS_CHECK(!out.empty(), "--set questions={}: no conversations in it", path.string());
    return out;
}

void check(const Config& cfg) {
    const fs::path dir = cfg.get<std::string>("model");
    LEVERS_CHECK(!dir.empty(), "chat needs --set model=DIR: a Hugging Face chat model's directory");
    models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
    data::ChatTemplate::from_dir(dir);  // one it has, and can render
    if (!cfg.get<std::string>("questions").empty()) read_questions(cfg.get<std::string>("questions"));
}

Result chat(const Config& cfg) {
    const fs::path dir = cfg.get<std::string>("model");
    auto model = models::load_hf_model(dir, dist::device(), cfg.run().compute);
    const auto tokenizer = models::hf_tokenizer(dir, model->vocab_size());
    const data::ChatTemplate chat = data::ChatTemplate::from_dir(dir);
    models::SampleOptions options{.max_new_tokens = cfg.get<int>("tokens"),
                                  .temperature = cfg.get<double>("temperature"),
                                  .top_k = cfg.get<int>("top_k"),
                                  .top_p = cfg.get<double>("top_p")};
    options.stop.assign(model->config().eos_token_ids.begin(), model->config().eos_token_ids.end());
    if (const auto end = tokenizer->token_id(data::end_of_turn(*tokenizer, chat))) options.stop.push_back(*end);
    const Json extra = cfg.get<bool>("thinking") ? Json::object() : Json{{"enable_thinking", false}};
    Rng rng(static_cast<std::uint64_t>(cfg.get<long>("seed")));

    const auto answer_to = [&](const Json& messages) {
        const auto ids = tokenizer->encode(chat.render(messages, true, extra));
        const auto out = models::generate(*model, ids, options, rng);
        return tokenizer->decode(std::vector<std::int32_t>(out.begin() + static_cast<long>(ids.size()), out.end()),
                                 true);
    };
    Json messages = Json::array();
    if (!cfg.get<std::string>("system").empty())
        messages.push_back({{"role", "system"}, {"content", cfg.get<std::string>("system")}});
    if (!cfg.get<std::string>("questions").empty()) {
        long answered = 0;
        for (const Json& conversation : read_questions(cfg.get<std::string>("questions"))) {
            Json asked = messages;
            for (const auto& m : conversation) asked.push_back(m);
            fmt::print("{}\n", Json{{"answer", answer_to(asked)}}.dump());
            std::fflush(stdout);
            ++answered;
        }
        return Result{{"answered", answered}};
    }
    const std::string prompt = cfg.get<std::string>("prompt");
    const bool terminal = prompt.empty() && isatty(STDIN_FILENO);
    std::string answer;
    int turns = 0;
    for (;;) {
        std::string user = prompt;
        if (prompt.empty()) {
            if (terminal) fmt::print("> "), std::fflush(stdout);
            if (!std::getline(std::cin, user)) break;
            if (user.empty()) continue;
        } else if (turns == 1) {
            break;
        }
        messages.push_back({{"role", "user"}, {"content", user}});
        answer = answer_to(messages);
        fmt::print("{}\n", answer);
        std::fflush(stdout);
        messages.push_back({{"role", "assistant"}, {"content", answer}});
        ++turns;
    }
    return Result{{"turns", turns}, {"answer", answer}};
}

}  // namespace

LEVERS_RECIPE(chat) {
    return levers::recipe("chat")
        .describe("a conversation with a Hugging Face chat model through its chat template: --set prompt=, or one "
                  "user turn per line of stdin")
        .param("model", "", "a Hugging Face chat model's directory (its tokenizer has a chat template)")
        .param("prompt", "", "one user turn, answered once (empty: read turns from stdin)")
        .param("questions", "", "FILE.jsonl: answer each line's conversation on its own, one JSON line each")
        .param("system", "", "a system message first (empty: none)")
        .param("thinking", true, "let reasoning models think first (Qwen 3's enable_thinking)")
        .param("tokens", 512, "most tokens per answer (fewer when the end of turn comes)", at_least(1))
        .param("temperature", 0.7, "sampling temperature", at_least(0))
        .param("top_k", 0, "sample among the k likeliest tokens (0: all)", at_least(0))
        .param("top_p", 0.9, "sample among the likeliest tokens whose probability reaches p (1: all)", at_least(0))
        .param("seed", 1, "sampling seed")
        .check(check)
        .run(chat);
}
