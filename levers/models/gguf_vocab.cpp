#include "levers/models/gguf_vocab.hpp"

#include "levers/core/error.hpp"
#include "levers/data/bpe_tokenizer.hpp"
#include "levers/models/hf_dir.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

namespace levers::models {

namespace fs = std::filesystem;
using data::GgufValue;
using json = nlohmann::json;

namespace {

// llama.cpp's token types.
enum TokenType : std::int64_t { normal = 1, unknown = 2, control = 3, user_defined = 4, unused = 5, byte = 6 };

// The pre-tokenizers llama.cpp knows by name, by the regex that splits the
// text before the merges (tokenizer.json's Split pattern).
struct KnownSplit {
    const char* pattern;
    const char* name;
};
const KnownSplit kSplits[] = {
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "llama-bpe"},  // Llama 3, SmolLM3
    {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
     "qwen2"},  // Qwen 2, 2.5, 3
    {data::BpeTokenizer::kGpt2Split, "gpt-2"},
};

json read_json(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return json::object();
    try {
        return json::parse(in);
    } catch (const json::exception& e) {
        LEVERS_FAIL("{} is not valid JSON: {}", path.string(), e.what());
    }
}

// A special token of tokenizer_config.json: a string, {"content": ...}, or absent.
std::optional<std::string> token_text(const json& config, const char* key) {
    if (!config.contains(key)) return std::nullopt;
    const json& v = config.at(key);
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content") && v.at("content").is_string()) return v.at("content").get<std::string>();
    return std::nullopt;
}

// chat_template.jinja, else tokenizer_config.json's chat_template (a string,
// or a list of named templates whose "default" is taken).
std::string chat_template_source(const fs::path& dir, const json& config) {
    if (std::ifstream in{dir / "chat_template.jinja"}) {
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    }
    if (!config.contains("chat_template")) return {};
    const json& t = config.at("chat_template");
    if (t.is_string()) return t.get<std::string>();
    if (t.is_array())
        for (const json& named : t)
            if (named.value("name", "") == "default") return named.value("template", "");
    return {};
}

std::vector<std::int64_t> token_types(const data::BpeTokenizer::Spec& spec, std::size_t size) {
    std::vector<std::int64_t> types(size, normal);
    for (std::size_t i = 0; i < size; ++i) {
        if (i >= spec.vocab.size() || spec.vocab[i].empty()) types[i] = unused;
        const std::string& t = i < spec.vocab.size() ? spec.vocab[i] : std::string();
        if (!spec.byte_level && spec.byte_fallback && t.size() == 6 && t.starts_with("<0x") && t.back() == '>')
            types[i] = byte;
    }
    for (const auto& a : spec.added)
        if (static_cast<std::size_t>(a.id) < size) types[static_cast<std::size_t>(a.id)] = a.special ? control : user_defined;
    // Last: the unknown token is often an added special one too, and llama.cpp wants it typed unknown.
    if (spec.unk && static_cast<std::size_t>(*spec.unk) < size) types[static_cast<std::size_t>(*spec.unk)] = unknown;
    return types;
}

// SentencePiece-style: llama.cpp merges the adjacent pair whose joined token
// scores highest; a token made by merge r scores −r, so its merges replay
// Hugging Face's order (lowest rank first). Tokens no merge makes: single
// characters, bytes and specials 0 (never merge results), longer ones far below every merge.
std::vector<double> merge_scores(const data::BpeTokenizer::Spec& spec, const std::vector<std::string>& tokens) {
    std::map<std::string, std::size_t> made_at;
    for (std::size_t r = 0; r < spec.merges.size(); ++r)
        made_at.emplace(spec.merges[r].first + spec.merges[r].second, r);
    std::vector<double> scores(tokens.size(), 0.0);
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (auto it = made_at.find(tokens[i]); it != made_at.end())
            scores[i] = -static_cast<double>(it->second) - 1;
        else if (tokens[i].size() > 4 && !tokens[i].starts_with("<"))  // longer than one UTF-8 character
            scores[i] = -1e9;
    }
    return scores;
}

const char* split_name(const data::BpeTokenizer::Spec& spec, const fs::path& dir) {
    for (const auto& known : kSplits)
        if (spec.split_pattern == known.pattern) return known.name;
    LEVERS_FAIL("{}: the tokenizer's pre-tokenizer splits with a regex llama.cpp has no name for ({}); GGUF export "
                "knows Llama 3's (llama-bpe), Qwen 2/3's (qwen2) and GPT-2's (gpt-2)",
                (dir / "tokenizer.json").string(), spec.split_pattern.empty() ? "none" : spec.split_pattern);
}

// A token's id as the tokenizer gives it: the lowest id that spells `text`, an
// added token standing in for the vocabulary's at its id (a few lookups: a scan).
std::optional<std::int64_t> token_id(const data::BpeTokenizer::Spec& spec, const std::string& text) {
    std::map<std::int64_t, const std::string*> added;
    for (const auto& a : spec.added) added[a.id] = &a.content;
    std::optional<std::int64_t> best;
    for (std::size_t id = 0; id < spec.vocab.size(); ++id)
        if (spec.vocab[id] == text && !added.contains(static_cast<std::int64_t>(id))) {
            best = static_cast<std::int64_t>(id);
            break;
        }
    for (const auto& [id, content] : added)
        if (*content == text && (!best || id < *best)) return id;
    return best;
}

}  // namespace

GgufVocab gguf_vocab(const fs::path& dir, const LlamaConfig& config) {
    const auto spec = hf_tokenizer_tables(dir, config.vocab_size);  // refuses a directory with no tokenizer.json
    const json tok_config = read_json(dir / "tokenizer_config.json");
    const auto size = static_cast<std::size_t>(config.vocab_size);

    std::vector<std::string> tokens(size);
    for (std::size_t i = 0; i < size; ++i)
        tokens[i] = i < spec.vocab.size() && !spec.vocab[i].empty() ? spec.vocab[i] : fmt::format("[PAD{}]", i);
    for (const auto& a : spec.added)
        if (static_cast<std::size_t>(a.id) < size) tokens[static_cast<std::size_t>(a.id)] = a.content;

    GgufVocab out;
    auto set = [&](const std::string& key, GgufValue v) { out.metadata.emplace_back(key, std::move(v)); };
    const bool gpt2 = spec.byte_level;
    set("tokenizer.ggml.model", GgufValue::string(gpt2 ? "gpt2" : "llama"));
    if (gpt2) set("tokenizer.ggml.pre", GgufValue::string(split_name(spec, dir)));
    set("tokenizer.ggml.tokens", GgufValue::strings(tokens));
    if (!gpt2) set("tokenizer.ggml.scores", GgufValue::f32s(merge_scores(spec, tokens)));
    set("tokenizer.ggml.token_type", GgufValue::i32s(token_types(spec, size)));
    if (gpt2) {
        std::vector<std::string> merges;
        merges.reserve(spec.merges.size());
        for (const auto& [a, b] : spec.merges) merges.push_back(a + " " + b);
        set("tokenizer.ggml.merges", GgufValue::strings(std::move(merges)));
    }

    auto id_of = [&](const char* key, std::int64_t fallback) -> std::int64_t {
        if (auto text = token_text(tok_config, key))
            if (auto id = token_id(spec, *text)) return *id;
        return fallback;
    };
    const std::int64_t bos = id_of("bos_token", config.bos_token_id);
    const std::int64_t eos = id_of("eos_token", config.eos_token_ids.empty() ? -1 : config.eos_token_ids.front());
    const std::int64_t pad = id_of("pad_token", -1);
    if (bos >= 0) set("tokenizer.ggml.bos_token_id", GgufValue::u32(static_cast<std::uint32_t>(bos)));
    if (eos >= 0) set("tokenizer.ggml.eos_token_id", GgufValue::u32(static_cast<std::uint32_t>(eos)));
    if (!gpt2 && spec.unk) set("tokenizer.ggml.unknown_token_id", GgufValue::u32(static_cast<std::uint32_t>(*spec.unk)));
    if (pad >= 0) set("tokenizer.ggml.padding_token_id", GgufValue::u32(static_cast<std::uint32_t>(pad)));
    // What levers' encode adds is what the tokenizer's post-processor adds.
    const bool adds_bos = !spec.prefix.empty();
    set("tokenizer.ggml.add_bos_token", GgufValue::boolean(adds_bos));
    set("tokenizer.ggml.add_eos_token", GgufValue::boolean(!spec.suffix.empty()));
    if (!gpt2)
        set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(spec.spaces_to_metaspace && spec.metaspace_in_front));

    const std::string chat = chat_template_source(dir, tok_config);
    if (!chat.empty()) set("tokenizer.chat_template", GgufValue::string(chat));

    // Ollama stops at the template's special markers (its own Modelfiles list
    // <|im_start|> and <|im_end|> for Qwen, the header and <|eot_id|> markers
    // for Llama 3) and at EOS; BOS starts a text, it never ends one.
    std::set<std::string> seen;
    for (const auto& a : spec.added)
        if (a.special && a.id != bos && chat.find(a.content) != std::string::npos && seen.insert(a.content).second)
            out.stop.push_back(a.content);
    if (eos >= 0 && static_cast<std::size_t>(eos) < size && seen.insert(tokens[static_cast<std::size_t>(eos)]).second)
        out.stop.push_back(tokens[static_cast<std::size_t>(eos)]);
    return out;
}

}  // namespace levers::models
