// Byte-pair-encoding tokenizers: GPT-2's, and those Hugging Face's
// tokenizer.json describes (Llama 3, Qwen 2/3: byte-level BPE after a regex
// split; Llama 2, Mistral: SentencePiece-style BPE over ▁-marked text with
// byte fallback). One engine; the files only choose its steps:
//
//   added tokens matched in the text first (<|im_start|> stays one token)
//   -> normalise (NFC; or spaces to ▁ with a ▁ in front)
//   -> split into pieces (a regex's matches; or the whole text)
//   -> each piece's symbols (its bytes as GPT-2's printable stand-ins; or its
//      characters, bytes as <0xNN> tokens where a character has none)
//   -> merges applied lowest rank first -> ids, then the BOS a template adds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace levers::data {

class BpeTokenizer {
public:
    // What a tokenizer is made of (what its files say).
    struct Spec {
        std::vector<std::string> vocab;                          // id -> token
        std::vector<std::pair<std::string, std::string>> merges;  // by rank
        std::string split_pattern;      // PCRE2 pattern whose matches are the pieces; empty: the whole text
        bool byte_level = true;         // GPT-2's byte -> printable character mapping; else characters + byte fallback
        bool byte_fallback = false;     // characters without a token become <0xNN> tokens
        bool ignore_merges = false;     // a piece that is a token is taken whole
        bool nfc = false;               // Unicode NFC first
        bool add_prefix_space = false;  // byte-level: a space before text that has none
        bool spaces_to_metaspace = false;  // SentencePiece: ' ' -> ▁ and a ▁ in front (Prepend/Replace, Metaspace)
        bool metaspace_in_front = true;    // with it: Gemma's Replace alone puts none in front (nor strips one)
        bool split_on_metaspace = false;   // Metaspace(split): each ▁ starts a piece
        struct Added {
            std::string content;
            std::int32_t id;
            bool special;
            bool lstrip = false, rstrip = false;  // swallow the whitespace before / after
        };
        std::vector<Added> added;
        std::vector<std::int32_t> prefix, suffix;  // what the post-processor adds around a text (BOS)
        std::optional<std::int32_t> unk;
        std::string name;  // for messages: "tokenizer.json (byte-level BPE, 128256 tokens)"

        // Ids in use: the vocabulary's and the added tokens' (which may lie past it).
        std::size_t token_count() const {
            std::size_t n = vocab.size();
            for (const auto& a : added) n = std::max(n, static_cast<std::size_t>(a.id) + 1);
            return n;
        }
    };

    // GPT-2's pre-tokenisation: contractions, letters, numbers, other symbols, spaces.
    static constexpr const char* kGpt2Split =
        R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

    explicit BpeTokenizer(Spec spec);
    // GPT-2's files: OpenAI's encoder.json + vocab.bpe or Hugging Face's
    // vocab.json + merges.txt. Throws levers::Error naming a missing or malformed file.
    static BpeTokenizer from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges);
    // The GPT-2 files the set-up installs under data_dir()/gpt2.
    static BpeTokenizer gpt2_default();
    // A Hugging Face tokenizer.json of model type BPE. Throws levers::Error
    // naming the file and the unsupported part (model type, normaliser,
    // pre-tokenizer, decoder) with those levers reads.
    static BpeTokenizer from_tokenizer_json(const std::filesystem::path& path);
    // What from_tokenizer_json builds the tokenizer from, read and checked
    // as far as the file's parts go (its merges are not matched against the
    // vocabulary: that is the tokenizer's construction), for a reader that
    // needs the tables only (GGUF export).
    static Spec read_tokenizer_json(const std::filesystem::path& path);
    // The tokenizer of `spec` read from `file`, a fault in it named with the file.
    static BpeTokenizer built_from(Spec spec, const std::filesystem::path& file);

    ~BpeTokenizer();
    BpeTokenizer(BpeTokenizer&&) noexcept;
    BpeTokenizer& operator=(BpeTokenizer&&) noexcept;

    // Text to ids; with add_special, the template's tokens around it (BOS).
    // Throws on text that is not valid UTF-8.
    std::vector<std::int32_t> encode(std::string_view text, bool add_special = false) const;
    // Ids to text (special tokens written out unless skip_special). Throws if
    // an id is outside the vocabulary.
    std::string decode(const std::vector<std::int32_t>& ids, bool skip_special = false) const;
    int vocab_size() const { return static_cast<int>(spec_.vocab.size()); }
    // The id of a token (added ones included), if it has one.
    std::optional<std::int32_t> token_id(std::string_view token) const;
    bool is_special(std::int32_t id) const;
    const std::string& name() const { return spec_.name; }
    // What it was made of (GGUF export writes the vocabulary and merges from it).
    const Spec& spec() const { return spec_; }

private:
    struct Engine;
    std::vector<std::int32_t> encode_piece(std::string_view piece) const;
    void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;
    Spec spec_;
    std::unique_ptr<Engine> engine_;
};

}  // namespace levers::data
