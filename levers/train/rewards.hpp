// Rewards for reinforcement learning on answers a program checks (GRPO):
// functions from a completion and its prompt's record to a number, kept by
// name in one registry, as recipes are. A user's project registers its own:
//
//   LEVERS_REWARD(ends_with_word, "1 when the answer's last word is the record's \"word\"") {
//       const std::string word = completion.field("word").get<std::string>();
//       return completion.text.ends_with(word) ? 1.0 : 0.0;
//   }
//
// and `--set rewards=ends_with_word` picks it. levers ships exact_match,
// contains, regex (PCRE2) and length_penalty; they read their settings
// (the record's field, the pattern, the length budget) from RewardSettings.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace levers::train {

// One sampled answer, as a reward sees it.
struct Completion {
    std::string text;                                 // decoded, the stop token left out
    const nlohmann::ordered_json* record = nullptr;   // the prompt's line of the prompts file
    std::int64_t tokens = 0;                          // tokens generated (a stop token counted)
    bool stopped = false;                             // ended on a stop token (else cut at the budget)
    // The record's `name`; throws levers::Error naming it when the record has none.
    const nlohmann::ordered_json& field(const std::string& name) const;
};

// What the shipped rewards read (the grpo recipe's settings).
struct RewardSettings {
    std::vector<std::string> answer_fields = {"answer"};  // exact_match's (the first) and contains' fields
    std::string pattern;              // regex's PCRE2 pattern
    std::int64_t max_tokens = 256;    // length_penalty: the completion budget
    std::int64_t length_buffer = 64;  // length_penalty: the last tokens of the budget where the penalty grows
};

using RewardFn = std::function<double(const Completion&)>;
// Makes a reward for the run's settings (a shipped reward compiles its pattern once here).
using RewardFactory = std::function<RewardFn(const RewardSettings&)>;

// Registers under `name` (static registration, as LEVERS_REWARD does); a
// second registration of a name throws levers::Error.
bool register_reward(const std::string& name, const std::string& help, RewardFactory make);
bool register_reward(const std::string& name, const std::string& help, RewardFn fn);

struct RewardInfo {
    std::string name, help;
};
std::vector<RewardInfo> registered_rewards();  // by name

// The reward `name` made for `settings`; throws levers::Error naming the
// registered ones when there is none of that name, or what is wrong with the
// settings (a pattern PCRE2 refuses).
RewardFn make_reward(const std::string& name, const RewardSettings& settings);

}  // namespace levers::train

#define LEVERS_REWARD(id, help)                                                                      \
    static double levers_reward_##id(const ::levers::train::Completion& completion);                 \
    [[maybe_unused]] static const bool levers_reward_registered_##id =                               \
        ::levers::train::register_reward(#id, help, ::levers::train::RewardFn(&levers_reward_##id)); \
    static double levers_reward_##id([[maybe_unused]] const ::levers::train::Completion& completion)
