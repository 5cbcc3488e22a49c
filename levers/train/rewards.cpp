#include "levers/train/rewards.hpp"

#include "levers/core/error.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <memory>

namespace levers::train {

namespace {

struct Entry {
    std::string help;
    RewardFactory make;
};

std::string trimmed(const std::string& s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

// A field's value as text: a string as it is, anything else as JSON writes it (42, true).
std::string text_of(const nlohmann::ordered_json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

// 1 when the answer, spaces trimmed, is the first answer field's value.
RewardFn exact_match(const RewardSettings& s) {
    LEVERS_CHECK(!s.answer_fields.empty(), "exact_match needs an answer field (--set answer_field=NAME)");
    const std::string field = s.answer_fields.front();
    return [field](const Completion& c) { return trimmed(c.text) == trimmed(text_of(c.field(field))) ? 1.0 : 0.0; };
}

// The share of the answer fields whose values the answer names (ignoring case).
RewardFn contains(const RewardSettings& s) {
    LEVERS_CHECK(!s.answer_fields.empty(), "contains needs answer fields (--set answer_field=NAME,NAME)");
    const std::vector<std::string> fields = s.answer_fields;
    return [fields](const Completion& c) {
        const std::string text = lower(c.text);
        double found = 0;
        for (const std::string& f : fields) found += text.find(lower(text_of(c.field(f)))) != std::string::npos;
        return found / static_cast<double>(fields.size());
    };
}

// 1 when the pattern matches somewhere in the answer (anchor it to demand the whole). Sampled answers may end
// inside a character's bytes: PCRE2 matches around invalid UTF-8 rather than failing.
RewardFn regex(const RewardSettings& s) {
    LEVERS_CHECK(!s.pattern.empty(), "the regex reward needs --set reward_regex=PATTERN (PCRE2)");
    int code = 0;
    PCRE2_SIZE offset = 0;
    pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(s.pattern.data()), s.pattern.size(),
                                         PCRE2_UTF | PCRE2_MATCH_INVALID_UTF, &code, &offset, nullptr);
    if (!compiled) {
        PCRE2_UCHAR message[256];
        pcre2_get_error_message(code, message, sizeof message);
        LEVERS_FAIL("--set reward_regex={}: PCRE2 refuses it at offset {}: {}", s.pattern, offset,
                    reinterpret_cast<const char*>(message));
    }
    std::shared_ptr<pcre2_code> held(compiled, pcre2_code_free);
    return [held](const Completion& c) {
        std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
            pcre2_match_data_create_from_pattern(held.get(), nullptr), pcre2_match_data_free);
        const int rc = pcre2_match(held.get(), reinterpret_cast<PCRE2_SPTR>(c.text.data()), c.text.size(), 0, 0,
                                   match.get(), nullptr);
        LEVERS_CHECK(rc >= 0 || rc == PCRE2_ERROR_NOMATCH, "PCRE2 failed matching (error {})", rc);
        return rc >= 0 ? 1.0 : 0.0;
    };
}

// DAPO's soft overlong penalty: 0 up to the budget less the buffer, then falling linearly to -1 at the budget.
RewardFn length_penalty(const RewardSettings& s) {
    LEVERS_CHECK(s.length_buffer >= 1 && s.length_buffer <= s.max_tokens, "--set length_buffer={} must be in [1, "
                 "max_completion_length={}]", s.length_buffer, s.max_tokens);
    const std::int64_t free = s.max_tokens - s.length_buffer, buffer = s.length_buffer;
    return [free, buffer](const Completion& c) {
        return c.tokens <= free ? 0.0 : -static_cast<double>(c.tokens - free) / static_cast<double>(buffer);
    };
}

std::map<std::string, Entry>& registry() {
    static std::map<std::string, Entry> entries = {
        {"exact_match", {"1 when the answer (trimmed) is the record's answer_field", exact_match}},
        {"contains", {"the share of the record's answer_field(s) the answer names, ignoring case", contains}},
        {"regex", {"1 when PCRE2's reward_regex matches in the answer", regex}},
        {"length_penalty", {"0 up to max_completion_length - length_buffer tokens, then down to -1 at the budget",
                            length_penalty}},
    };
    return entries;
}

}  // namespace

const nlohmann::ordered_json& Completion::field(const std::string& name) const {
    LEVERS_CHECK(record && record->is_object() && record->contains(name), "the prompt's record has no \"{}\"", name);
    return (*record)[name];
}

bool register_reward(const std::string& name, const std::string& help, RewardFactory make) {
    LEVERS_CHECK(!name.empty() && make, "a reward needs a name and a function");
    LEVERS_CHECK(registry().emplace(name, Entry{help, std::move(make)}).second, "the reward {} is registered twice",
                 name);
    return true;
}

bool register_reward(const std::string& name, const std::string& help, RewardFn fn) {
    LEVERS_CHECK(static_cast<bool>(fn), "the reward {} has no function", name);
    return register_reward(name, help, RewardFactory([fn](const RewardSettings&) { return fn; }));
}

std::vector<RewardInfo> registered_rewards() {
    std::vector<RewardInfo> out;
    for (const auto& [name, e] : registry()) out.push_back({name, e.help});
    return out;
}

RewardFn make_reward(const std::string& name, const RewardSettings& settings) {
    const auto it = registry().find(name);
    if (it == registry().end()) {
        std::string names;
        for (const auto& [n, e] : registry()) names += (names.empty() ? "" : ", ") + n;
        LEVERS_FAIL("--set rewards={}: no reward of that name is registered (registered: {}; a project registers "
                    "its own with LEVERS_REWARD)", name, names);
    }
    return it->second.make(settings);
}

}  // namespace levers::train
