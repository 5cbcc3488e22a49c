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

}  // namespace

BpeTokenizer BpeTokenizer::from_tokenizer_json(const std::filesystem::path& path) {
    const std::string file = path.string();
    const json j = json::parse(read_file(path, "a Hugging Face tokenizer.json"), nullptr, false);
    LEVERS_CHECK(j.is_object() && j.contains("model"), "{}: not a tokenizer.json (a JSON object with a \"model\")", file);
    const json& model = j.at("model");
    const std::string type = model.value("type", model.contains("merges") ? "BPE" : "");
    LEVERS_CHECK(type == "BPE", "{}: model type \"{}\" is not supported; levers reads BPE tokenizers (Llama, Qwen, "
                 "Mistral, GPT-2)", file, type);
    LEVERS_CHECK(model.contains("vocab") && model.at("vocab").is_object() && model.contains("merges"),
                 "{}: a BPE model needs \"vocab\" and \"merges\"", file);
    LEVERS_CHECK(model.value("continuing_subword_prefix", json()).is_null() ||
                     model.at("continuing_subword_prefix") == "",
                 "{}: a continuing_subword_prefix is not supported", file);
    Spec s;
    s.vocab.resize(model.at("vocab").size());
    for (const auto& [token, id] : model.at("vocab").items()) {
        const auto at = id.get<std::size_t>();
        if (at >= s.vocab.size()) s.vocab.resize(at + 1);
        s.vocab[at] = token;
    }
    for (const json& m : model.at("merges")) {
        if (m.is_array()) {
            s.merges.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>());
        } else {
            const std::string line = m.get<std::string>();
            const auto space = line.find(' ', 1);
            LEVERS_CHECK(space != std::string::npos, "{}: merge '{}' is not 'left right'", file, line);
            s.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
        }
    }
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
    if (!model.value("unk_token", json()).is_null()) {
        const std::string unk = model.at("unk_token").get<std::string>();
        if (auto it = model.at("vocab").find(unk); it != model.at("vocab").end()) s.unk = it->get<std::int32_t>();
    }
    read_normalizer(j.value("normalizer", json()), s, file);
    read_pre_tokenizer(j.value("pre_tokenizer", json()), s, file);
    read_post_processor(j.value("post_processor", json()), s, file, added);
    check_decoder(j.value("decoder", json()), s, file);
    std::size_t tokens = s.vocab.size();
    for (const auto& a : s.added) tokens = std::max(tokens, static_cast<std::size_t>(a.id) + 1);
    s.name = fmt::format("{} ({} BPE, {} tokens)", path.filename().string(),
                         s.byte_level ? "byte-level" : "SentencePiece-style", tokens);
    try {
        return BpeTokenizer(std::move(s));
    } catch (const Error& e) {
        LEVERS_FAIL("{}: {}", file, e.message());
    }
}

}  // namespace levers::data
