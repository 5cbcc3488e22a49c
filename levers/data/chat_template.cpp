#include "levers/data/chat_template.hpp"

#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"

#include <fmt/format.h>

namespace levers::data {

namespace {
using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

// A special token as tokenizer_config.json writes it: a string, null, or an added token's {"content": ...}.
Json token_text(const Json& v) {
    if (v.is_object() && v.contains("content")) return v["content"];
    if (v.is_string()) return v;
    return nullptr;
}
}  // namespace

ChatTemplate::ChatTemplate(std::string_view source, Json special, std::string name)
    : template_(source, std::move(name)), special_(std::move(special)) {}

ChatTemplate ChatTemplate::from_dir(const fs::path& dir) {
    const fs::path config_file = dir / "tokenizer_config.json", jinja_file = dir / "chat_template.jinja";
    Json config = Json::object();
    if (fs::exists(config_file)) {
        try {
            config = Json::parse(read_file(config_file));
        } catch (const Json::exception& e) {
            LEVERS_FAIL("{} is not JSON: {}", config_file.string(), e.what());
        }
    }
    std::string source;
    if (fs::exists(jinja_file)) {
        source = read_file(jinja_file);
    } else if (config.contains("chat_template") && config["chat_template"].is_string()) {
        source = config["chat_template"].get<std::string>();
    } else if (config.contains("chat_template") && config["chat_template"].is_array()) {
        for (const Json& named : config["chat_template"])
            if (named.value("name", "") == "default") source = named.value("template", "");
        LEVERS_CHECK(!source.empty(), "{}: chat_template lists named templates but none is named \"default\"",
                     config_file.string());
    } else {
        LEVERS_FAIL("{} has no chat template (neither chat_template.jinja nor a chat_template in "
                    "tokenizer_config.json): a base model's tokenizer, not a chat model's",
                    dir.string());
    }
    Json special = Json::object();
    for (const char* key : {"bos_token", "eos_token", "unk_token", "pad_token"})
        special[key] = config.contains(key) ? token_text(config[key]) : Json();
    return ChatTemplate(source, std::move(special), "the chat template of " + dir.string());
}

std::string ChatTemplate::render(const Json& messages, bool add_generation_prompt, const Json& extra) const {
    Json variables = special_;
    variables["messages"] = messages;
    variables["tools"] = nullptr;
    variables["add_generation_prompt"] = add_generation_prompt;
    for (const auto& [k, v] : extra.items()) variables[k] = v;
    return template_.render(variables);
}

void check_messages(const Json& messages, const std::string& where) {
    LEVERS_CHECK(messages.is_array() && !messages.empty(),
                 "{}: \"messages\" must be a non-empty list of {{\"role\", \"content\"}}", where);
    for (std::size_t i = 0; i < messages.size(); ++i) {
        const Json& m = messages[i];
        LEVERS_CHECK(m.is_object() && m.contains("role") && m["role"].is_string() && m.contains("content") &&
                         m["content"].is_string(),
                     "{}: message {} must be an object with a string \"role\" and a string \"content\"", where, i + 1);
        const std::string role = m["role"].get<std::string>();
        LEVERS_CHECK(role == "system" || role == "user" || role == "assistant" || role == "tool",
                     "{}: message {} has the role \"{}\"; roles are system, user, assistant and tool", where, i + 1,
                     role);
    }
}

}  // namespace levers::data
