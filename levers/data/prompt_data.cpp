#include "levers/data/prompt_data.hpp"

#include "levers/core/error.hpp"
#include "levers/data/json_lines.hpp"

#include <algorithm>

namespace levers::data {

PromptFile read_prompt_file(const std::filesystem::path& path, const BpeTokenizer& tokenizer, const ChatTemplate* chat,
                            std::int64_t max_tokens) {
    PromptFile out;
    for_each_json_line(path, "the prompts", [&](const nlohmann::ordered_json& r, const std::string& where) {
        LEVERS_CHECK(r.is_object() && r.contains("prompt"), "{}: a line needs \"prompt\" (text, or a list of "
                     "messages), beside the fields its rewards read", where);
        const auto& p = r["prompt"];
        Prompt prompt{.record = r, .where = where};
        if (p.is_string()) {
            prompt.ids = tokenizer.encode(p.get<std::string>(), true);
            ++out.texts;
        } else {
            LEVERS_CHECK(p.is_array() && !p.empty(), "{}: \"prompt\" must be text or a list of messages", where);
            LEVERS_CHECK(chat != nullptr, "{}: a conversation goes through the model's chat template, and its "
                         "tokenizer has none (text prompts need none)", where);
            prompt.ids = tokenizer.encode(chat->render(p, true));
            ++out.conversations;
        }
        const auto n = static_cast<std::int64_t>(prompt.ids.size());
        LEVERS_CHECK(n >= 1, "{}: the prompt is empty", where);
        LEVERS_CHECK(n <= max_tokens, "{}: the prompt is {} tokens; with max_completion_length after it the context "
                     "holds {} (a shorter prompt, or --set max_completion_length= less)", where, n, max_tokens);
        out.longest = std::max(out.longest, n);
        out.prompts.push_back(std::move(prompt));
    });
    LEVERS_CHECK(!out.prompts.empty(), "{} has no prompts (one JSON object per line)", path.string());
    return out;
}

}  // namespace levers::data
