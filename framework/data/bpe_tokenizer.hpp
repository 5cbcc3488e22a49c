// The GPT-2 byte-pair-encoding tokenizer.
//
// Reads OpenAI's encoder.json + vocab.bpe or Hugging Face's vocab.json +
// merges.txt (the same formats under other names). Text is split with GPT-2's
// pre-tokenisation pattern (PCRE2, Unicode classes), each piece's bytes are
// mapped to printable characters, and merges are applied lowest rank first.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace levers::data {

class BpeTokenizer {
public:
    // Throws levers::Error naming the file if either is missing or malformed.
    static BpeTokenizer from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges);
    // The GPT-2 files the set-up installs under data_dir()/gpt2.
    static BpeTokenizer gpt2_default();

    ~BpeTokenizer();
    BpeTokenizer(BpeTokenizer&&) noexcept;
    BpeTokenizer& operator=(BpeTokenizer&&) noexcept;

    std::vector<std::int32_t> encode(std::string_view text) const;
    // Throws if a token id is outside the vocabulary.
    std::string decode(const std::vector<std::int32_t>& tokens) const;
    int vocab_size() const { return static_cast<int>(id_to_token_.size()); }

private:
    BpeTokenizer();
    std::vector<std::int32_t> encode_piece(std::string_view piece) const;

    struct Regex;
    std::unique_ptr<Regex> regex_;
    std::unordered_map<std::string, std::int32_t> token_to_id_;
    std::vector<std::string> id_to_token_;
    std::map<std::pair<std::string, std::string>, int> merge_rank_;
    std::string byte_to_char_[256];                      // byte → UTF-8 of its printable stand-in
    std::unordered_map<std::string, unsigned char> char_to_byte_;
    mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache_;
};

}  // namespace levers::data
