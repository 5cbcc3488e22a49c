#define PCRE2_CODE_UNIT_WIDTH 8
#include "framework/data/bpe_tokenizer.hpp"

#include "framework/core/error.hpp"
#include "framework/data/files.hpp"

#include <nlohmann/json.hpp>
#include <pcre2.h>

#include <climits>
#include <sstream>

namespace levers::data {

namespace {

// GPT-2's pre-tokenisation: contractions, letters, numbers, other symbols, spaces.
constexpr const char* kPattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string utf8(unsigned cp) {
    std::string s;
    if (cp < 0x80) {
        s += static_cast<char>(cp);
    } else if (cp < 0x800) {
        s += static_cast<char>(0xC0 | (cp >> 6));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        s += static_cast<char>(0xE0 | (cp >> 12));
        s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return s;
}

// Splits a UTF-8 string into its characters.
std::vector<std::string> utf8_chars(std::string_view s) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
        out.emplace_back(s.substr(i, len));
        i += len;
    }
    return out;
}

}  // namespace

struct BpeTokenizer::Regex {
    pcre2_code* code = nullptr;
    ~Regex() { pcre2_code_free(code); }
};

BpeTokenizer::BpeTokenizer() : regex_(std::make_unique<Regex>()) {
    // GPT-2's byte → character table: printable Latin-1 bytes stand for
    // themselves, the rest are shifted to code points 256 and up.
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
        bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        byte_to_char_[b] = utf8(printable ? static_cast<unsigned>(b) : static_cast<unsigned>(256 + shifted++));
        char_to_byte_[byte_to_char_[b]] = static_cast<unsigned char>(b);
    }
    int err = 0;
    PCRE2_SIZE offset = 0;
    regex_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kPattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP,
                                 &err, &offset, nullptr);
    LEVERS_CHECK(regex_->code != nullptr, "GPT-2 pre-tokenisation pattern failed to compile (PCRE2 error {})", err);
    pcre2_jit_compile(regex_->code, PCRE2_JIT_COMPLETE);  // an optimisation: the interpreter serves if JIT is absent
}

BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;

BpeTokenizer BpeTokenizer::from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges) {
    BpeTokenizer tok;
    nlohmann::json vocab;
    try {
        vocab = nlohmann::json::parse(read_data_file(vocab_json));
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: not a JSON vocabulary (expected an object of token → id): {}", vocab_json.string(), e.what());
    }
    LEVERS_CHECK(vocab.is_object() && !vocab.empty(), "{}: expected a non-empty JSON object of token → id",
                 vocab_json.string());
    tok.id_to_token_.resize(vocab.size());
    for (const auto& [token, id] : vocab.items()) {
        LEVERS_CHECK(id.is_number_integer() && id.get<long>() >= 0 && id.get<std::size_t>() < vocab.size(),
                     "{}: token '{}' has id {}, expected an integer in [0, {})", vocab_json.string(), token,
                     id.dump(), vocab.size());
        tok.token_to_id_[token] = id.get<std::int32_t>();
        tok.id_to_token_[id.get<std::size_t>()] = token;
    }
    std::istringstream lines(read_data_file(merges));
    std::string line;
    int rank = 0, line_no = 0;
    while (std::getline(lines, line)) {
        ++line_no;
        if (line.starts_with("#version") || line.empty()) continue;
        auto space = line.find(' ');
        LEVERS_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                         line.find(' ', space + 1) == std::string::npos,
                     "{}:{}: expected a merge 'left right', got '{}'", merges.string(), line_no, line);
        tok.merge_rank_[{line.substr(0, space), line.substr(space + 1)}] = rank++;
    }
    LEVERS_CHECK(rank > 0, "{}: holds no merges", merges.string());
    for (int b = 0; b < 256; ++b)
        LEVERS_CHECK(tok.token_to_id_.contains(tok.byte_to_char_[b]),
                     "{}: byte {} has no token; a byte-level BPE vocabulary needs all 256", vocab_json.string(), b);
    return tok;
}

BpeTokenizer BpeTokenizer::gpt2_default() {
    auto dir = data_dir() / "gpt2";
    return from_files(dir / "encoder.json", dir / "vocab.bpe");
}

std::vector<std::int32_t> BpeTokenizer::encode_piece(std::string_view piece) const {
    if (auto hit = cache_.find(std::string(piece)); hit != cache_.end()) return hit->second;
    std::vector<std::string> word;
    for (char c : piece) word.push_back(byte_to_char_[static_cast<unsigned char>(c)]);
    // Merge the lowest-ranked adjacent pair until none is in the table.
    while (word.size() > 1) {
        int best = INT_MAX;
        std::size_t at = 0;
        for (std::size_t i = 0; i + 1 < word.size(); ++i) {
            auto r = merge_rank_.find({word[i], word[i + 1]});
            if (r != merge_rank_.end() && r->second < best) {
                best = r->second;
                at = i;
            }
        }
        if (best == INT_MAX) break;
        const std::string left = word[at], right = word[at + 1];
        std::vector<std::string> merged;
        for (std::size_t i = 0; i < word.size(); ++i) {
            if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
                merged.push_back(left + right);
                ++i;
            } else {
                merged.push_back(word[i]);
            }
        }
        word = std::move(merged);
    }
    std::vector<std::int32_t> ids;
    for (const auto& w : word) {
        auto it = token_to_id_.find(w);
        LEVERS_CHECK(it != token_to_id_.end(), "BPE produced '{}', which is not in the vocabulary", w);
        ids.push_back(it->second);
    }
    cache_.emplace(std::string(piece), ids);
    return ids;
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text) const {
    std::vector<std::int32_t> out;
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex_->code, nullptr);
    PCRE2_SIZE start = 0;
    // PCRE2 checks the whole subject's UTF-8 on every call unless told not to:
    // check it on the first match only, or encoding is quadratic in the text.
    std::uint32_t options = 0;
    while (start < text.size()) {
        int rc = pcre2_match(regex_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, options,
                             match, nullptr);
        options = PCRE2_NO_UTF_CHECK;
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(match);
            LEVERS_FAIL("text is not valid UTF-8 near byte {} (PCRE2 error {}); GPT-2 BPE encodes Unicode text",
                        start, rc);
        }
        PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
        if (span[1] == span[0]) break;  // the pattern never matches empty text; guard anyway
        auto ids = encode_piece(text.substr(span[0], span[1] - span[0]));
        out.insert(out.end(), ids.begin(), ids.end());
        start = span[1];
    }
    pcre2_match_data_free(match);
    return out;
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& tokens) const {
    std::string out;
    for (std::int32_t id : tokens) {
        LEVERS_CHECK(id >= 0 && static_cast<std::size_t>(id) < id_to_token_.size(),
                     "token id {} is outside the vocabulary [0, {})", id, id_to_token_.size());
        for (const auto& ch : utf8_chars(id_to_token_[static_cast<std::size_t>(id)])) {
            auto it = char_to_byte_.find(ch);
            LEVERS_CHECK(it != char_to_byte_.end(), "token {} holds a character outside GPT-2's byte table", id);
            out += static_cast<char>(it->second);
        }
    }
    return out;
}

}  // namespace levers::data
