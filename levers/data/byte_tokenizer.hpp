// Byte-level tokenizer: every byte is its own token (vocabulary 256), so any
// text round-trips exactly and nothing is out of vocabulary.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace levers::data {

struct ByteTokenizer {
    static constexpr int kVocabSize = 256;
    static std::vector<std::int32_t> encode(std::string_view text) {
        std::vector<std::int32_t> out(text.size());
        for (std::size_t i = 0; i < text.size(); ++i) out[i] = static_cast<unsigned char>(text[i]);
        return out;
    }
    static std::string decode(const std::vector<std::int32_t>& tokens) {
        std::string out(tokens.size(), '\0');
        for (std::size_t i = 0; i < tokens.size(); ++i) out[i] = static_cast<char>(tokens[i] & 0xff);
        return out;
    }
};

}  // namespace levers::data
