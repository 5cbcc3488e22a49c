// Reading Hugging Face's tokenizer.json into the BPE engine's steps. What
// levers reads: model BPE; normaliser null, NFC, Prepend("▁") + Replace("
// ", "▁") (SentencePiece's spaces) or Replace alone (Gemma's); pre-tokenizer
// null, ByteLevel, Split (a regex, Isolated) then ByteLevel, Metaspace, or
// Gemma's split on spaces that its normaliser has already replaced; post-processor
// TemplateProcessing (a BOS before the text) or ByteLevel; decoder ByteLevel
// or SentencePiece's Replace/ByteFallback/Fuse/Strip.
#include "levers/core/error.hpp"
#include "levers/core/read_file.hpp"
#include "levers/data/bpe_tokenizer.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace levers::data {

namespace {

using json = nlohmann::json;

constexpr const char* kMetaspace = "\xe2\x96\x81";

std::string type_of(const json& j) { return j.is_object() && j.contains("type") ? j.at("type").get<std::string>() : ""; }

// The steps of a Sequence, or the one step.
std::vector<json> steps(const json& j, const char* list) {
    if (j.is_null()) return {};
    if (type_of(j) == "Sequence") return j.at(list).get<std::vector<json>>();
    return {j};
}

void read_normalizer(const json& j, BpeTokenizer::Spec& s, const std::string& file) {
    bool prepend = false, replace = false;
    for (const json& step : steps(j, "normalizers")) {
        const std::string type = type_of(step);
        if (type == "NFC") {
            s.nfc = true;
        } else if (type == "Prepend" && step.at("prepend") == kMetaspace) {
            prepend = true;
        } else if (type == "Replace" && step.at("pattern").value("String", "") == " " && step.at("content") == kMetaspace) {
            replace = true;
        } else {
            LEVERS_FAIL("{}: normalizer {} is not supported; levers reads NFC and SentencePiece's Prepend(\"▁\") + "
                        "Replace(\" \", \"▁\")", file, step.dump());
        }
    }
    LEVERS_CHECK(replace || !prepend, "{}: a Prepend(\"▁\") normalizer without Replace(\" \", \"▁\") is not "
                 "supported", file);
    s.spaces_to_metaspace = replace;
    s.metaspace_in_front = prepend;
}

void read_pre_tokenizer(const json& j, BpeTokenizer::Spec& s, const std::string& file) {
    const std::vector<json> list = steps(j, "pretokenizers");
    if (list.empty()) {  // the whole (normalised) text is one piece: SentencePiece-style
        s.byte_level = false;
        return;
    }
    s.byte_level = false;
    for (const json& step : list) {
        const std::string type = type_of(step);
        if (type == "Split" && step.contains("pattern") && step.at("pattern").value("String", "") == " " &&
            s.spaces_to_metaspace) {
            continue;  // Gemma's: the normaliser left no space to split on
        }
        if (type == "Split") {
            LEVERS_CHECK(step.contains("pattern") && step.at("pattern").contains("Regex") &&
                             step.value("behavior", "") == "Isolated" && !step.value("invert", false),
                         "{}: a Split pre-tokenizer is read with a Regex pattern, behavior Isolated and no invert; got {}",
                         file, step.dump());
            LEVERS_CHECK(s.split_pattern.empty(), "{}: two regex splits are not supported", file);
            s.split_pattern = step.at("pattern").at("Regex").get<std::string>();
        } else if (type == "ByteLevel") {
            s.byte_level = true;
            s.add_prefix_space = step.value("add_prefix_space", false);
            if (step.value("use_regex", true)) {
                LEVERS_CHECK(s.split_pattern.empty(), "{}: a regex split and a ByteLevel regex together are not "
                             "supported", file);
                s.split_pattern = BpeTokenizer::kGpt2Split;
            }
        } else if (type == "Metaspace") {
            LEVERS_CHECK(step.value("replacement", "") == kMetaspace, "{}: Metaspace with replacement {} is not supported",
                         file, step.value("replacement", ""));
            const std::string scheme = step.value("prepend_scheme", step.value("add_prefix_space", true) ? "always" : "never");
            LEVERS_CHECK(scheme == "always" || scheme == "first", "{}: Metaspace prepend_scheme \"{}\" is not "
                         "supported; levers reads \"always\" and \"first\"", file, scheme);
            s.spaces_to_metaspace = true;
            s.split_on_metaspace = step.value("split", true);
        } else {
            LEVERS_FAIL("{}: pre-tokenizer {} is not supported; levers reads ByteLevel, Split (a regex) then "
                        "ByteLevel, Metaspace, or none", file, type.empty() ? step.dump() : type);
        }
    }
}

void read_post_processor(const json& j, BpeTokenizer::Spec& s, const std::string& file,
                         const std::map<std::string, std::int32_t>& added) {
    const std::string type = type_of(j);
    if (j.is_null() || type == "ByteLevel") return;
    LEVERS_CHECK(type == "TemplateProcessing", "{}: post-processor {} is not supported; levers reads "
                 "TemplateProcessing and ByteLevel", file, type);
    bool text = false;
    for (const json& item : j.at("single")) {
        if (item.contains("Sequence")) {
            text = true;
            continue;
        }
        const std::string token = item.at("SpecialToken").at("id").get<std::string>();
        const auto it = added.find(token);
        LEVERS_CHECK(it != added.end(), "{}: the post-processor adds '{}', which is not an added token", file, token);
        (text ? s.suffix : s.prefix).push_back(it->second);
    }
}

void check_decoder(const json& j, const BpeTokenizer::Spec& s, const std::string& file) {
    const std::string type = type_of(j);
    if (j.is_null() || type == "ByteLevel") {
        LEVERS_CHECK(j.is_null() || s.byte_level, "{}: a ByteLevel decoder for a tokenizer that is not byte-level", file);
        return;
    }
    for (const json& step : steps(j, "decoders")) {
        const std::string t = type_of(step);
        LEVERS_CHECK(t == "Replace" || t == "ByteFallback" || t == "Fuse" || t == "Strip",
                     "{}: decoder {} is not supported; levers reads ByteLevel and SentencePiece's "
                     "Replace/ByteFallback/Fuse/Strip", file, t);
    }
}

// The model's vocabulary and merges, taken as the parser meets them instead of
// built into the document first (Llama 3's 128K tokens and 280K merges: the
// document's nodes cost more than the parse); the rest of the file is parsed
// as usual.
struct BpeTables {
    std::vector<std::pair<std::string, json>> vocab;  // token, id as written
    std::vector<std::pair<std::string, std::string>> merges;
    std::vector<std::string> bad_merges;  // as written, for the error
    bool has_vocab = false, has_merges = false;
};

json parse_capturing(const std::string& text, BpeTables& t) {
    std::vector<std::string> path(8);  // the key at each depth
    std::string key, left;
    int pair_items = 0;  // merges written as ["left", "right"]: items seen of the current pair
    auto in = [&](int depth, const char* list) { return depth >= 2 && path[1] == "model" && path[2] == list; };
    const json::parser_callback_t take = [&](int depth, json::parse_event_t event, json& parsed) {
        using E = json::parse_event_t;
        if (event == E::key && depth < static_cast<int>(path.size())) {
            path[static_cast<std::size_t>(depth)] = parsed.get<std::string>();
            for (std::size_t d = static_cast<std::size_t>(depth) + 1; d < path.size(); ++d) path[d].clear();
        }
        if (depth == 2 && event == E::object_start && in(2, "vocab")) t.has_vocab = true;
        if (depth == 2 && event == E::array_start && in(2, "merges")) t.has_merges = true;
        if (in(depth, "vocab") && depth == 3) {
            if (event == E::key) return key = parsed.get<std::string>(), false;
            if (event == E::value) return t.vocab.emplace_back(std::move(key), std::move(parsed)), false;
        }
        if (in(depth, "merges") && depth >= 3) {
            if (depth == 3 && event == E::value) {
                if (!parsed.is_string()) return t.bad_merges.push_back(parsed.dump()), false;
                auto line = parsed.get<std::string>();
                const auto space = line.find(' ', 1);
                if (space == std::string::npos) return t.bad_merges.push_back(line), false;
                t.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
                return false;
            }
            if (depth == 3 && event == E::array_start) pair_items = 0;
            if (depth == 4 && event == E::value) {
                if (!parsed.is_string()) return t.bad_merges.push_back(parsed.dump()), false;
                if (++pair_items == 1) left = parsed.get<std::string>();
                else if (pair_items == 2) t.merges.emplace_back(std::move(left), parsed.get<std::string>());
                return false;
            }
            if (depth == 3 && event == E::array_end) {
                if (pair_items != 2) t.bad_merges.push_back(fmt::format("a list of {} items", pair_items));
                return false;
            }
        }
        return true;
    };
    return json::parse(text, take, false);
}

}  // namespace

BpeTokenizer BpeTokenizer::from_tokenizer_json(const std::filesystem::path& path) {
    return built_from(read_tokenizer_json(path), path);
}

BpeTokenizer BpeTokenizer::built_from(Spec spec, const std::filesystem::path& file) {
    try {
        return BpeTokenizer(std::move(spec));
    } catch (const Error& e) {
        LEVERS_FAIL("{}: {}", file.string(), e.message());
    }
}

BpeTokenizer::Spec BpeTokenizer::read_tokenizer_json(const std::filesystem::path& path) {
    const std::string file = path.string();
    BpeTables tables;
    const json j = parse_capturing(read_file(path, "a Hugging Face tokenizer.json"), tables);
    LEVERS_CHECK(j.is_object() && j.contains("model"), "{}: not a tokenizer.json (a JSON object with a \"model\")", file);
    const json& model = j.at("model");
    const std::string type = model.value("type", tables.has_merges ? "BPE" : "");
    LEVERS_CHECK(type == "BPE", "{}: model type \"{}\" is not supported; levers reads BPE tokenizers (Llama, Qwen, "
                 "Mistral, GPT-2)", file, type);
    LEVERS_CHECK(tables.has_vocab && tables.has_merges, "{}: a BPE model needs \"vocab\" and \"merges\"", file);
    LEVERS_CHECK(tables.bad_merges.empty(), "{}: merge '{}' is not 'left right'", file,
                 tables.bad_merges.empty() ? "" : tables.bad_merges.front());
    LEVERS_CHECK(model.value("continuing_subword_prefix", json()).is_null() ||
                     model.at("continuing_subword_prefix") == "",
                 "{}: a continuing_subword_prefix is not supported", file);
    Spec s;
    s.vocab.resize(tables.vocab.size());
    std::optional<std::int32_t> unk;
    const std::string unk_token = model.value("unk_token", json()).is_string() ? model.at("unk_token").get<std::string>() : "";
    for (auto& [token, id] : tables.vocab) {
        LEVERS_CHECK(id.is_number_unsigned(), "{}: token '{}' has id {}, expected an integer >= 0", file, token, id.dump());
        const auto at = id.get<std::size_t>();
        if (at >= s.vocab.size()) s.vocab.resize(at + 1);
        if (!unk_token.empty() && token == unk_token) unk = static_cast<std::int32_t>(at);
        s.vocab[at] = std::move(token);
    }
    s.merges = std::move(tables.merges);
    s.byte_fallback = model.value("byte_fallback", false);
    s.ignore_merges = model.value("ignore_merges", false);
    std::map<std::string, std::int32_t> added;
    for (const json& a : j.value("added_tokens", json::array())) {
        s.added.push_back({.content = a.at("content").get<std::string>(),
                           .id = a.at("id").get<std::int32_t>(),
                           .special = a.value("special", false),
                           .lstrip = a.value("lstrip", false),
                           .rstrip = a.value("rstrip", false)});
        added[s.added.back().content] = s.added.back().id;
    }
    s.unk = unk;
    read_normalizer(j.value("normalizer", json()), s, file);
    read_pre_tokenizer(j.value("pre_tokenizer", json()), s, file);
    read_post_processor(j.value("post_processor", json()), s, file, added);
    check_decoder(j.value("decoder", json()), s, file);
    s.name = fmt::format("{} ({} BPE, {} tokens)", path.filename().string(),
                         s.byte_level ? "byte-level" : "SentencePiece-style", s.token_count());
    return s;
}

}  // namespace levers::data
