// A model's chat template: the Jinja template of its tokenizer files
// (chat_template.jinja, or tokenizer_config.json's `chat_template`, a
// string or a list of named templates whose "default" is taken), rendered
// with the tokenizer's special tokens as Hugging Face's
// apply_chat_template renders it (levers/data/jinja/jinja.hpp).
#pragma once

#include "levers/data/jinja/jinja.hpp"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

namespace levers::data {

class ChatTemplate {
public:
    // `special`: the tokens a template may name (bos_token, eos_token, ...), as strings or null.
    ChatTemplate(std::string_view source, nlohmann::ordered_json special, std::string name);
    // From a tokenizer's directory (a model's). Throws levers::Error naming
    // the directory when it has no template, or the construct the engine refuses.
    static ChatTemplate from_dir(const std::filesystem::path& dir);

    // The text of `messages` (a list of {"role", "content", ...}); with
    // add_generation_prompt, what starts the assistant's next turn.
    // `extra`: more variables (enable_thinking, tools, ...).
    std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                       const nlohmann::ordered_json& extra = nlohmann::ordered_json::object()) const;

    const nlohmann::ordered_json& special_tokens() const { return special_; }

private:
    JinjaTemplate template_;
    nlohmann::ordered_json special_;
};

// Checks a conversation: a non-empty list of objects with a string "role"
// (system, user, assistant or tool) and a string "content". Throws
// levers::Error saying what is wrong, prefixed by `where` ("chat.jsonl line 3").
void check_messages(const nlohmann::ordered_json& messages, const std::string& where);

}  // namespace levers::data
