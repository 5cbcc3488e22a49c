// Which tokens of a rendered conversation are the assistant's: the template
// renders the conversation whole, and for each assistant turn the
// conversation before it with the generation prompt, which must be where the
// whole one stands when that turn begins (Hugging Face's templates are
// written so); the turn ends at the template's end-of-turn token, found by
// rendering a probe answer once followed by a user turn and once last, and
// keeping what both write after it up to their first special token. The
// text is then tokenized piece by piece, so every token lies in one piece.
#include "levers/data/sft_data.hpp"

#include "levers/core/error.hpp"
#include "levers/data/json_lines.hpp"

#include <fmt/format.h>


namespace levers::data {

namespace {
using Json = nlohmann::ordered_json;
}  // namespace

std::string end_of_turn(const BpeTokenizer& tokenizer, const ChatTemplate& chat) {
    const std::string probe = "\x01probe\x01";
    const Json user = {{"role", "user"}, {"content", "Hi"}}, answer = {{"role", "assistant"}, {"content", probe}};
    const auto after = [&](const Json& messages) {
        const std::string text = chat.render(messages, false);
        const std::size_t at = text.find(probe);
        LEVERS_CHECK(at != std::string::npos, "the chat template drops the assistant's text; levers cannot tell "
                     "which tokens are the assistant's");
        return text.substr(at + probe.size());
    };
    const std::string last = after(Json{user, answer}), followed = after(Json{user, answer, user});
    std::size_t same = 0;
    while (same < last.size() && same < followed.size() && last[same] == followed[same]) ++same;
    const std::vector<std::int32_t> ids = tokenizer.encode(last.substr(0, same));
    for (std::size_t k = 0; k < ids.size(); ++k)
        if (tokenizer.is_special(ids[k])) return tokenizer.decode({ids.begin(), ids.begin() + static_cast<long>(k) + 1});
    return last.substr(0, same);
}

namespace {
Json instruction_messages(const Json& r, const std::string& where) {
    const auto text = [&](const char* key, bool required) -> std::string {
        if (!r.contains(key)) {
            LEVERS_CHECK(!required, "{}: an instruction needs \"{}\"", where, key);
            return "";
        }
        LEVERS_CHECK(r[key].is_string(), "{}: \"{}\" must be a string", where, key);
        return r[key].get<std::string>();
    };
    const std::string instruction = text("instruction", true), input = text("input", false), output = text("output", true);
    return Json::array({{{"role", "user"}, {"content", input.empty() ? instruction : instruction + "\n\n" + input}},
                        {{"role", "assistant"}, {"content", output}}});
}
}  // namespace

std::int64_t SftExample::learned_count() const {
    std::int64_t n = 0;
    for (std::size_t k = 1; k < learned.size(); ++k) n += learned[k];  // the first token is never predicted
    return n;
}

SftExample encode_conversation(const Json& messages, const BpeTokenizer& tokenizer, const ChatTemplate& chat,
                               const std::string& end, const std::string& where, std::size_t first_learned) {
    check_messages(messages, where);
    const std::string whole = chat.render(messages, false);
    std::vector<std::pair<std::size_t, std::size_t>> spans;  // [begin, end) of each assistant turn in `whole`
    for (std::size_t i = 0; i < messages.size(); ++i) {
        if (messages[i]["role"] != "assistant" || i < first_learned) continue;
        const std::string before = chat.render(Json(std::vector<Json>(messages.begin(), messages.begin() + static_cast<long>(i))), true);
        LEVERS_CHECK(whole.compare(0, before.size(), before) == 0,
                     "{}: the chat template renders the turns before message {} differently alone than in the "
                     "whole conversation; levers cannot tell which tokens are the assistant's", where, i + 1);
        const std::size_t stop = whole.find(end, before.size());
        LEVERS_CHECK(stop != std::string::npos, "{}: message {} (the assistant's) does not end with the template's "
                     "end of turn '{}'", where, i + 1, end);
        spans.emplace_back(before.size(), stop + end.size());
    }
    LEVERS_CHECK(!spans.empty(), "{}: the conversation has no assistant turn to learn from", where);
    SftExample out;
    std::size_t at = 0;
    const auto add = [&](std::size_t from, std::size_t to, bool learned) {
        if (to <= from) return;
        for (const std::int32_t id : tokenizer.encode(std::string_view(whole).substr(from, to - from))) {
            out.ids.push_back(id);
            out.learned.push_back(learned ? 1 : 0);
        }
    };
    for (const auto& [begin, stop] : spans) {
        add(at, begin, false);
        add(begin, stop, true);
        at = stop;
    }
    add(at, whole.size(), false);
    return out;
}

std::optional<std::int32_t> eos_id(const BpeTokenizer& tokenizer, const ChatTemplate* chat) {
    const auto eos = chat ? chat->special_tokens().value("eos_token", Json()) : Json();
    return eos.is_string() ? tokenizer.token_id(eos.get<std::string>()) : std::optional<std::int32_t>();
}

SftFile read_sft_file(const std::filesystem::path& path, const BpeTokenizer& tokenizer, const ChatTemplate* chat) {
    SftFile out;
    const std::optional<std::int32_t> eos = eos_id(tokenizer, chat);
    const std::string end = chat ? end_of_turn(tokenizer, *chat) : std::string();
    for_each_json_line(path, "the examples", [&](const Json& r, const std::string& where) {
        LEVERS_CHECK(r.contains("messages") || r.contains("instruction") || r.contains("text"),
                     "{}: an example is {{\"messages\": [...]}}, {{\"instruction\", \"input\", \"output\"}} or "
                     "{{\"text\"}}", where);
        if (r.contains("text")) {
            LEVERS_CHECK(r["text"].is_string(), "{}: \"text\" must be a string", where);
            SftExample e;
            e.ids = tokenizer.encode(r["text"].get<std::string>(), true);
            if (eos) e.ids.push_back(*eos);
            e.learned.assign(e.ids.size(), 1);
            out.examples.push_back(std::move(e));
            ++out.texts;
            return;
        }
        LEVERS_CHECK(chat != nullptr, "{}: conversations and instructions go through the model's chat template, and "
                     "its tokenizer has none (plain {{\"text\"}} examples need none)", where);
        const bool conversation = r.contains("messages");
        out.examples.push_back(encode_conversation(conversation ? r["messages"] : instruction_messages(r, where),
                                                   tokenizer, *chat, end, where));
        ++(conversation ? out.conversations : out.instructions);
    });
    LEVERS_CHECK(!out.examples.empty(), "{} has no examples (one JSON object per line)", path.string());
    return out;
}

}  // namespace levers::data
