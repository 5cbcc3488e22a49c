// chat: talk to a Hugging Face chat model (Llama, Mistral, Qwen, SmolLM3, Gemma, or what sft
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
#include "recipes/lm_params.hpp"
#include "recipes/quantized_base.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <fstream>
#include <iostream>

namespace levers_recipe_chat {

namespace {

using namespace levers;
namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const Param<std::string> model_dir{"model", "", "a Hugging Face chat model's directory (its tokenizer has a chat "
                                   "template)"};
const Param<std::string> prompt{"prompt", "", "one user turn, answered once (empty: read turns from stdin)"};
const Param<std::string> questions{"questions", "", "FILE.jsonl: answer each line's conversation on its own, one JSON "
                                   "line each"};
const Param<std::string> system_message{"system", "", "a system message first (empty: none)"};
const Param<bool> thinking{"thinking", true, "let reasoning models think first (Qwen 3's enable_thinking)"};
const Param<int> tokens{"tokens", 512, "most tokens per answer (fewer when the end of turn comes)", at_least(1)};

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
    const fs::path dir = cfg[model_dir];
    LEVERS_CHECK(!dir.empty(), "chat needs --set model=DIR: a Hugging Face chat model's directory");
    models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
    data::ChatTemplate::from_dir(dir);  // one it has, and can render
    if (!cfg[questions].empty()) read_questions(cfg[questions]);
    recipes::check_quantize(cfg, false, dir);
}

Result chat(const Config& cfg) {
    const fs::path dir = cfg[model_dir];
    auto model = recipes::load_hf_to_read(dir, cfg);
    const auto tokenizer = models::hf_tokenizer(dir, model->vocab_size());
    const data::ChatTemplate chat = data::ChatTemplate::from_dir(dir);
    models::SampleOptions options{.max_new_tokens = cfg[tokens],
                                  .temperature = cfg[recipes::temperature],
                                  .top_k = cfg[recipes::top_k],
                                  .top_p = cfg[recipes::top_p]};
    options.stop.assign(model->config().eos_token_ids.begin(), model->config().eos_token_ids.end());
    if (const auto end = tokenizer->token_id(data::end_of_turn(*tokenizer, chat))) options.stop.push_back(*end);
    const Json extra = cfg[thinking] ? Json::object() : Json{{"enable_thinking", false}};
    Rng rng(cfg[settings::seed]);

    const auto answer_to = [&](const Json& messages) {
        const auto ids = tokenizer->encode(chat.render(messages, true, extra));
        const auto out = models::generate(*model, ids, options, rng);
        return tokenizer->decode(std::vector<std::int32_t>(out.begin() + static_cast<long>(ids.size()), out.end()),
                                 true);
    };
    Json messages = Json::array();
    if (!cfg[system_message].empty()) messages.push_back({{"role", "system"}, {"content", cfg[system_message]}});
    if (!cfg[questions].empty()) {
        long answered = 0;
        for (const Json& conversation : read_questions(cfg[questions])) {
            Json asked = messages;
            for (const auto& m : conversation) asked.push_back(m);
            fmt::print("{}\n", Json{{"answer", answer_to(asked)}}.dump());
            std::fflush(stdout);
            ++answered;
        }
        return Result{{"answered", answered}};
    }
    const std::string turn = cfg[prompt];
    const bool terminal = turn.empty() && isatty(STDIN_FILENO);
    std::string answer;
    int turns = 0;
    for (;;) {
        std::string user = turn;
        if (turn.empty()) {
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
        .params(model_dir, prompt, questions, system_message, thinking, tokens, recipes::temperature.with_default(0.7),
                recipes::top_k.with_default(0), recipes::top_p.with_default(0.9), settings::seed.with_default(1),
                settings::quantize, settings::double_quant)
        .check(check)
        .run(chat);
}

}  // namespace levers_recipe_chat
