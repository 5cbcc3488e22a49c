// Prompts for reinforcement learning (GRPO), read from a JSON-lines file in
// TRL's forms, one object per line: {"prompt": "text"} (tokenized with the
// tokenizer's leading special tokens) or {"prompt": [{"role": "user", ...},
// ...]} (rendered through the chat template, the assistant's turn opened).
// Every other field of the line stays with the prompt: the rewards read
// them (the answer a completion is checked against).
#pragma once

#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/chat_template.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace levers::data {

struct Prompt {
    std::vector<std::int32_t> ids;
    nlohmann::ordered_json record;  // the whole line
    std::string where;              // "FILE line N", for messages naming it
};

struct PromptFile {
    std::vector<Prompt> prompts;
    std::int64_t conversations = 0, texts = 0;
    std::int64_t longest = 0;  // tokens of the longest prompt
};

// Reads `path`. Throws levers::Error naming the file and line of the first
// bad one: not JSON, no "prompt", a prompt neither text nor messages, a
// conversation without a template to render it, a prompt longer than
// `max_tokens`; or an empty file.
PromptFile read_prompt_file(const std::filesystem::path& path, const BpeTokenizer& tokenizer, const ChatTemplate* chat,
                            std::int64_t max_tokens);

}  // namespace levers::data
