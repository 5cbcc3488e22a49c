#define PCRE2_CODE_UNIT_WIDTH 8
#include "levers/data/bpe_tokenizer.hpp"

#include "levers/core/error.hpp"
#include "levers/data/files.hpp"
#include "levers/data/unicode_nfc.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <pcre2.h>

#include <algorithm>
#include <queue>
#include <sstream>
#include <tuple>

namespace levers::data {

namespace {

constexpr std::string_view kMetaspace = "\xe2\x96\x81";  // ▁

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

std::size_t utf8_length(unsigned char lead) { return lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : 4; }

std::string replace_all(std::string_view s, std::string_view from, std::string_view to) {
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
        if (s.substr(i, from.size()) == from) {
            out += to;
            i += from.size();
        } else {
            out += s[i++];
        }
    }
    return out;
}

}  // namespace

struct BpeTokenizer::Engine {
    pcre2_code* regex = nullptr;
    std::unordered_map<std::string, std::int32_t> token_to_id;
    // (left id, right id) -> (rank, merged id)
    std::unordered_map<std::uint64_t, std::pair<int, std::int32_t>> merges;
    std::string byte_to_char[256];  // byte-level: byte -> UTF-8 of its printable stand-in
    std::unordered_map<std::string, unsigned char> char_to_byte;
    std::int32_t byte_token[256];   // byte fallback: the id of <0xNN>, or -1
    // Indices into spec.added by their first byte, longest first: a text position is compared with the added
    // tokens that can start there (Gemma has 6,415 of them).
    std::vector<std::size_t> added_by_first[256];
    std::vector<char> special;                 // by id
    std::vector<char> added_id;                // by id: an added token (decoded as written)
    mutable std::unordered_map<std::string, std::vector<std::int32_t>> cache;
    ~Engine() { pcre2_code_free(regex); }
    static std::uint64_t key(std::int32_t a, std::int32_t b) {
        return static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32 | static_cast<std::uint32_t>(b);
    }
};

BpeTokenizer::BpeTokenizer(Spec spec) : spec_(std::move(spec)), engine_(std::make_unique<Engine>()) {
    Engine& e = *engine_;
    for (const auto& a : spec_.added) {
        LEVERS_CHECK(a.id >= 0 && !a.content.empty(), "{}: added token '{}' has id {}", spec_.name, a.content, a.id);
        if (static_cast<std::size_t>(a.id) >= spec_.vocab.size()) spec_.vocab.resize(static_cast<std::size_t>(a.id) + 1);
        spec_.vocab[static_cast<std::size_t>(a.id)] = a.content;
    }
    e.token_to_id.reserve(spec_.vocab.size());  // no rehash on the way: each walks every node, missing the cache
    for (std::size_t id = 0; id < spec_.vocab.size(); ++id)
        if (!spec_.vocab[id].empty()) e.token_to_id.emplace(spec_.vocab[id], static_cast<std::int32_t>(id));
    e.special.assign(spec_.vocab.size(), 0);
    e.added_id.assign(spec_.vocab.size(), 0);
    for (std::size_t i = 0; i < spec_.added.size(); ++i) {
        e.added_by_first[static_cast<unsigned char>(spec_.added[i].content[0])].push_back(i);
        e.special[static_cast<std::size_t>(spec_.added[i].id)] = spec_.added[i].special;
        e.added_id[static_cast<std::size_t>(spec_.added[i].id)] = 1;
    }
    for (auto& list : e.added_by_first)
        std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) {
            return spec_.added[a].content.size() > spec_.added[b].content.size();
        });
    // GPT-2's byte table: printable Latin-1 bytes stand for themselves, the rest shift to code points 256 and up.
    int shifted = 0;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        e.byte_to_char[b] = utf8(printable ? static_cast<unsigned>(b) : static_cast<unsigned>(256 + shifted++));
        e.char_to_byte[e.byte_to_char[b]] = static_cast<unsigned char>(b);
        const auto fallback = e.token_to_id.find(fmt::format("<0x{:02X}>", b));
        e.byte_token[b] = fallback == e.token_to_id.end() ? -1 : fallback->second;
    }
    if (spec_.byte_level)
        for (int b = 0; b < 256; ++b)
            LEVERS_CHECK(e.token_to_id.contains(e.byte_to_char[b]),
                         "{}: byte {} has no token; a byte-level BPE vocabulary needs all 256", spec_.name, b);
    e.merges.reserve(spec_.merges.size());
    std::string joined;
    for (std::size_t rank = 0; rank < spec_.merges.size(); ++rank) {
        const auto& [left, right] = spec_.merges[rank];
        joined.assign(left).append(right);
        const auto l = e.token_to_id.find(left), r = e.token_to_id.find(right), m = e.token_to_id.find(joined);
        LEVERS_CHECK(l != e.token_to_id.end() && r != e.token_to_id.end() && m != e.token_to_id.end(),
                     "{}: merge {} '{} {}' joins tokens that are not all in the vocabulary", spec_.name, rank + 1, left,
                     right);
        e.merges.try_emplace(Engine::key(l->second, r->second), static_cast<int>(rank), m->second);
    }
    if (!spec_.split_pattern.empty()) {
        int err = 0;
        PCRE2_SIZE offset = 0;
        e.regex = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(spec_.split_pattern.c_str()), PCRE2_ZERO_TERMINATED,
                                PCRE2_UTF | PCRE2_UCP, &err, &offset, nullptr);
        LEVERS_CHECK(e.regex != nullptr, "{}: the split pattern does not compile (PCRE2 error {} at {})", spec_.name,
                     err, offset);
        pcre2_jit_compile(e.regex, PCRE2_JIT_COMPLETE);  // an optimisation: the interpreter serves if JIT is absent
    }
}

BpeTokenizer::~BpeTokenizer() = default;
BpeTokenizer::BpeTokenizer(BpeTokenizer&&) noexcept = default;
BpeTokenizer& BpeTokenizer::operator=(BpeTokenizer&&) noexcept = default;

BpeTokenizer BpeTokenizer::from_files(const std::filesystem::path& vocab_json, const std::filesystem::path& merges) {
    nlohmann::json vocab;
    try {
        vocab = nlohmann::json::parse(read_data_file(vocab_json));
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: not a JSON vocabulary (expected an object of token → id): {}", vocab_json.string(), e.what());
    }
    LEVERS_CHECK(vocab.is_object() && !vocab.empty(), "{}: expected a non-empty JSON object of token → id",
                 vocab_json.string());
    Spec spec;
    spec.name = "GPT-2 BPE (" + vocab_json.string() + ")";
    spec.split_pattern = BpeTokenizer::kGpt2Split;
    spec.vocab.resize(vocab.size());
    for (const auto& [token, id] : vocab.items()) {
        LEVERS_CHECK(id.is_number_integer() && id.get<long>() >= 0 && id.get<std::size_t>() < vocab.size(),
                     "{}: token '{}' has id {}, expected an integer in [0, {})", vocab_json.string(), token,
                     id.dump(), vocab.size());
        spec.vocab[id.get<std::size_t>()] = token;
    }
    std::istringstream lines(read_data_file(merges));
    std::string line;
    int line_no = 0;
    while (std::getline(lines, line)) {
        ++line_no;
        if (line.starts_with("#version") || line.empty()) continue;
        auto space = line.find(' ');
        LEVERS_CHECK(space != std::string::npos && space > 0 && space + 1 < line.size() &&
                         line.find(' ', space + 1) == std::string::npos,
                     "{}:{}: expected a merge 'left right', got '{}'", merges.string(), line_no, line);
        spec.merges.emplace_back(line.substr(0, space), line.substr(space + 1));
    }
    LEVERS_CHECK(!spec.merges.empty(), "{}: holds no merges", merges.string());
    spec.name = "GPT-2 BPE";
    try {
        return BpeTokenizer(std::move(spec));
    } catch (const Error& e) {
        LEVERS_FAIL("{}: {}", vocab_json.string(), e.message());
    }
}

BpeTokenizer BpeTokenizer::gpt2_default() {
    auto dir = data_dir() / "gpt2";
    return from_files(dir / "encoder.json", dir / "vocab.bpe");
}

std::optional<std::int32_t> BpeTokenizer::token_id(std::string_view token) const {
    const auto it = engine_->token_to_id.find(std::string(token));
    if (it == engine_->token_to_id.end()) return std::nullopt;
    return it->second;
}

bool BpeTokenizer::is_special(std::int32_t id) const {
    return id >= 0 && static_cast<std::size_t>(id) < engine_->special.size() && engine_->special[static_cast<std::size_t>(id)];
}

std::vector<std::int32_t> BpeTokenizer::encode_piece(std::string_view piece) const {
    const Engine& e = *engine_;
    const bool cached = piece.size() <= 64;
    if (cached)
        if (auto hit = e.cache.find(std::string(piece)); hit != e.cache.end()) return hit->second;
    // The piece's symbols.
    std::vector<std::int32_t> ids;
    if (spec_.byte_level) {
        std::string mapped;
        for (char c : piece) mapped += e.byte_to_char[static_cast<unsigned char>(c)];
        if (spec_.ignore_merges)
            if (auto whole = e.token_to_id.find(mapped); whole != e.token_to_id.end()) ids.push_back(whole->second);
        if (ids.empty())
            for (char c : piece) ids.push_back(e.token_to_id.at(e.byte_to_char[static_cast<unsigned char>(c)]));
    } else {
        if (spec_.ignore_merges)
            if (auto whole = e.token_to_id.find(std::string(piece)); whole != e.token_to_id.end())
                ids.push_back(whole->second);
        if (ids.empty()) {
            // Each character's token; without one, its bytes' <0xNN> tokens (or the unknown token).
            for (std::size_t at = 0; at < piece.size();) {
                const std::size_t len = std::min(utf8_length(static_cast<unsigned char>(piece[at])), piece.size() - at);
                const auto it = e.token_to_id.find(std::string(piece.substr(at, len)));
                if (it != e.token_to_id.end()) {
                    ids.push_back(it->second);
                } else if (spec_.byte_fallback) {
                    for (std::size_t b = at; b < at + len; ++b) {
                        const std::int32_t t = e.byte_token[static_cast<unsigned char>(piece[b])];
                        LEVERS_CHECK(t >= 0, "{}: byte {} has no <0x..> token for byte fallback", spec_.name,
                                     static_cast<unsigned char>(piece[b]));
                        ids.push_back(t);
                    }
                } else {
                    LEVERS_CHECK(spec_.unk.has_value(), "{}: '{}' has no token and the tokenizer no unknown token",
                                 spec_.name, piece.substr(at, len));
                    ids.push_back(*spec_.unk);
                }
                at += len;
            }
        }
    }
    // Merges, lowest rank first (leftmost among equal ranks), through a heap of candidate pairs.
    const std::size_t n = ids.size();
    std::vector<int> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (std::size_t i = 0; i < n; ++i) {
        prev[i] = static_cast<int>(i) - 1;
        next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
    }
    using Candidate = std::tuple<int, int, std::int32_t, std::int32_t>;  // rank, left position, left id, right id
    std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
    const auto consider = [&](int left) {
        if (left < 0 || next[static_cast<std::size_t>(left)] < 0) return;
        const std::int32_t a = ids[static_cast<std::size_t>(left)], b = ids[static_cast<std::size_t>(next[static_cast<std::size_t>(left)])];
        if (auto m = e.merges.find(Engine::key(a, b)); m != e.merges.end()) heap.emplace(m->second.first, left, a, b);
    };
    for (std::size_t i = 0; i + 1 < n; ++i) consider(static_cast<int>(i));
    while (!heap.empty()) {
        const auto [rank, left, a, b] = heap.top();
        heap.pop();
        const auto l = static_cast<std::size_t>(left);
        const int right = next[l];
        if (!alive[l] || right < 0 || ids[l] != a || ids[static_cast<std::size_t>(right)] != b) continue;  // stale
        ids[l] = e.merges.at(Engine::key(a, b)).second;
        alive[static_cast<std::size_t>(right)] = 0;
        next[l] = next[static_cast<std::size_t>(right)];
        if (next[l] >= 0) prev[static_cast<std::size_t>(next[l])] = left;
        consider(prev[l]);
        consider(left);
    }
    std::vector<std::int32_t> out;
    for (std::size_t i = 0; i < n; ++i)
        if (alive[i]) out.push_back(ids[i]);
    if (cached) e.cache.emplace(std::string(piece), out);
    return out;
}

void BpeTokenizer::encode_plain(std::string_view raw, std::vector<std::int32_t>& out) const {
    if (raw.empty()) return;
    std::string text(raw);
    if (spec_.nfc) text = nfc(text);
    if (spec_.spaces_to_metaspace)
        text = (spec_.metaspace_in_front ? std::string(kMetaspace) : std::string()) + replace_all(text, " ", kMetaspace);
    if (spec_.add_prefix_space && text.front() != ' ') text = " " + text;
    if (spec_.split_on_metaspace) {  // each ▁ starts a piece
        std::size_t start = 0;
        for (std::size_t at = text.find(kMetaspace, 1); at != std::string::npos; at = text.find(kMetaspace, at + 1)) {
            const auto ids = encode_piece(std::string_view(text).substr(start, at - start));
            out.insert(out.end(), ids.begin(), ids.end());
            start = at;
        }
        const auto ids = encode_piece(std::string_view(text).substr(start));
        out.insert(out.end(), ids.begin(), ids.end());
        return;
    }
    if (!engine_->regex) {
        const auto ids = encode_piece(text);
        out.insert(out.end(), ids.begin(), ids.end());
        return;
    }
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(engine_->regex, nullptr);
    PCRE2_SIZE start = 0, done = 0;
    // PCRE2 checks the whole subject's UTF-8 on every call unless told not to:
    // check it on the first match only, or encoding is quadratic in the text.
    std::uint32_t options = 0;
    const auto piece = [&](std::size_t from, std::size_t to) {
        if (to <= from) return;
        const auto ids = encode_piece(std::string_view(text).substr(from, to - from));
        out.insert(out.end(), ids.begin(), ids.end());
    };
    while (start < text.size()) {
        const int rc = pcre2_match(engine_->regex, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start,
                                   options, match, nullptr);
        options = PCRE2_NO_UTF_CHECK;
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            pcre2_match_data_free(match);
            LEVERS_FAIL("text is not valid UTF-8 near byte {} (PCRE2 error {}); {} encodes Unicode text", start, rc,
                        spec_.name);
        }
        const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
        if (span[1] == span[0]) {  // an empty match: step one character on
            start = span[0] + utf8_length(static_cast<unsigned char>(text[span[0]]));
            continue;
        }
        piece(done, span[0]);  // what lies between matches is a piece too (the Isolated split)
        piece(span[0], span[1]);
        done = start = span[1];
    }
    pcre2_match_data_free(match);
    piece(done, text.size());
}

std::vector<std::int32_t> BpeTokenizer::encode(std::string_view text, bool add_special) const {
    std::vector<std::int32_t> out;
    if (add_special) out = spec_.prefix;
    // Added tokens first, leftmost and then longest; the text between them is encoded plainly.
    std::size_t plain = 0;
    for (std::size_t i = 0; i < text.size();) {
        const Spec::Added* hit = nullptr;
        for (std::size_t a : engine_->added_by_first[static_cast<unsigned char>(text[i])]) {
            const auto& added = spec_.added[a];
            if (text.compare(i, added.content.size(), added.content) == 0) {
                hit = &added;
                break;
            }
        }
        if (!hit) {
            ++i;
            continue;
        }
        std::size_t before = i, after = i + hit->content.size();
        if (hit->lstrip)
            while (before > plain && std::isspace(static_cast<unsigned char>(text[before - 1]))) --before;
        if (hit->rstrip)
            while (after < text.size() && std::isspace(static_cast<unsigned char>(text[after]))) ++after;
        encode_plain(text.substr(plain, before - plain), out);
        out.push_back(hit->id);
        plain = i = after;
    }
    encode_plain(text.substr(plain), out);
    if (add_special) out.insert(out.end(), spec_.suffix.begin(), spec_.suffix.end());
    return out;
}

std::string BpeTokenizer::decode(const std::vector<std::int32_t>& ids, bool skip_special) const {
    const Engine& e = *engine_;
    std::string out;
    for (std::int32_t id : ids) {
        LEVERS_CHECK(id >= 0 && static_cast<std::size_t>(id) < spec_.vocab.size(),
                     "token id {} is outside the vocabulary [0, {})", id, spec_.vocab.size());
        const auto at = static_cast<std::size_t>(id);
        if (skip_special && e.special[at]) continue;
        const std::string& token = spec_.vocab[at];
        if (e.added_id[at]) {  // SentencePiece's decoder reads added tokens too (Gemma's runs of ▁)
            out += spec_.byte_level ? token : replace_all(token, kMetaspace, " ");
        } else if (spec_.byte_level) {
            for (std::size_t i = 0; i < token.size();) {
                const std::size_t len = utf8_length(static_cast<unsigned char>(token[i]));
                const auto it = e.char_to_byte.find(token.substr(i, len));
                LEVERS_CHECK(it != e.char_to_byte.end(), "token {} holds a character outside the byte-level table", id);
                out += static_cast<char>(it->second);
                i += len;
            }
        } else if (token.size() == 6 && token.starts_with("<0x") && token.ends_with(">")) {
            out += static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16));
        } else {
            out += replace_all(token, kMetaspace, " ");
        }
    }
    // SentencePiece's decoder strips the space its normaliser put in front.
    if (spec_.spaces_to_metaspace && spec_.metaspace_in_front && out.starts_with(' ')) out.erase(0, 1);
    return out;
}

}  // namespace levers::data
