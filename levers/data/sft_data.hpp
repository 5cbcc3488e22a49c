// Supervised fine-tuning data: examples read from a JSON-lines file, each
// line a conversation ({"messages": [{"role", "content"}, ...]}, rendered
// through the model's chat template), an instruction ({"instruction",
// "input" (optional), "output"}: a user turn and the assistant's answer) or
// plain text ({"text"}: every token learned). Each example becomes token
// ids and, per token, whether predicting it counts in the loss: in
// conversations and instructions only the assistant's turns (their text
// and the template's end-of-turn), so the model learns to answer, not to ask.
#pragma once

#include "levers/data/bpe_tokenizer.hpp"
#include "levers/data/chat_template.hpp"

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace levers::data {

struct SftExample {
    std::vector<std::int32_t> ids;
    std::vector<std::uint8_t> learned;  // per token: 1 where predicting it counts
    std::int64_t learned_count() const;
};

struct SftFile {
    std::vector<SftExample> examples;
    std::int64_t conversations = 0, instructions = 0, texts = 0;  // how many of each form
};

// Reads `path` (one JSON object per non-empty line). `chat` renders
// conversations and instructions (null: a tokenizer without a template,
// which then takes plain text only). Throws levers::Error naming the file
// and line of the first bad one: not JSON, none of the three forms, an
// unknown role, a conversation without an assistant turn, an empty file.
SftFile read_sft_file(const std::filesystem::path& path, const BpeTokenizer& tokenizer, const ChatTemplate* chat);

// What the template writes right after an assistant's text to end its turn
// (e.g. "<|im_end|>"): up to its first special token. Throws levers::Error
// if the template drops the assistant's text.
std::string end_of_turn(const BpeTokenizer& tokenizer, const ChatTemplate& chat);

// One conversation's ids and learned tokens (the assistant's turns, each
// ending at `end`: the template's end_of_turn, found once for a whole file).
// Assistant turns before message `first_learned` are context only (a
// preference pair's prompt: only the answer after it is scored).
SftExample encode_conversation(const nlohmann::ordered_json& messages, const BpeTokenizer& tokenizer,
                               const ChatTemplate& chat, const std::string& end, const std::string& where,
                               std::size_t first_learned = 0);

// The tokenizer's end-of-sequence id as the template's eos_token names it (none without one).
std::optional<std::int32_t> eos_id(const BpeTokenizer& tokenizer, const ChatTemplate* chat);

}  // namespace levers::data
