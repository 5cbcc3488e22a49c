#include "levers/data/preference_data.hpp"

#include "levers/core/error.hpp"
#include "levers/data/json_lines.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <map>

namespace levers::data {

namespace {
using Json = nlohmann::ordered_json;

// An answer of a conversation as assistant messages: a list of them, or a string as one.
Json answer_messages(const Json& v, const char* key, const std::string& where) {
    if (v.is_string()) return Json::array({{{"role", "assistant"}, {"content", v}}});
    LEVERS_CHECK(v.is_array() && !v.empty(), "{}: \"{}\" must be a string or a list of assistant messages", where, key);
    for (const Json& m : v)
        LEVERS_CHECK(m.is_object() && m.value("role", "") == "assistant",
                     "{}: \"{}\" holds a message that is not the assistant's (the prompt holds the others)", where, key);
    return v;
}

// Plain text: the prompt (with the tokenizer's leading special tokens) then the answer and end of sequence, as
// TRL tokenizes its standard form (each part on its own).
SftExample encode_text(const std::string& prompt, const std::string& answer, const BpeTokenizer& tokenizer,
                       std::optional<std::int32_t> eos) {
    SftExample e;
    e.ids = tokenizer.encode(prompt, true);
    e.learned.assign(e.ids.size(), 0);
    std::vector<std::int32_t> tail = tokenizer.encode(answer);
    if (eos) tail.push_back(*eos);
    e.ids.insert(e.ids.end(), tail.begin(), tail.end());
    e.learned.resize(e.ids.size(), 1);
    return e;
}

std::int64_t prompt_length(const SftExample& e) {
    return std::find(e.learned.begin(), e.learned.end(), 1) - e.learned.begin();
}
}  // namespace

PreferenceFile read_preference_file(const std::filesystem::path& path, const BpeTokenizer& tokenizer,
                                    const ChatTemplate* chat, std::int64_t context) {
    PreferenceFile out;
    const std::optional<std::int32_t> eos = eos_id(tokenizer, chat);
    std::string end;  // the template's end of turn, found at the first conversation
    for_each_json_line(path, "the preference pairs", [&](const Json& r, const std::string& where) {
        for (const char* key : {"prompt", "chosen", "rejected"})
            LEVERS_CHECK(r.contains(key), "{}: a preference pair needs \"{}\" (and \"prompt\", \"chosen\", "
                         "\"rejected\": text, or a conversation and the assistant's answers)", where, key);
        LEVERS_CHECK(r["chosen"] != r["rejected"], "{}: \"chosen\" and \"rejected\" are the same answer; a pair "
                     "teaches nothing without a difference", where);
        PreferencePair pair;
        if (r["prompt"].is_string()) {
            for (const char* key : {"chosen", "rejected"})
                LEVERS_CHECK(r[key].is_string(), "{}: with a text prompt, \"{}\" must be text too", where, key);
            pair.chosen = encode_text(r["prompt"], r["chosen"], tokenizer, eos);
            pair.rejected = encode_text(r["prompt"], r["rejected"], tokenizer, eos);
            ++out.texts;
        } else {
            LEVERS_CHECK(r["prompt"].is_array() && !r["prompt"].empty(), "{}: \"prompt\" must be text or a list of "
                         "messages", where);
            LEVERS_CHECK(chat != nullptr, "{}: a conversation goes through the model's chat template, and its "
                         "tokenizer has none (text pairs need none)", where);
            if (end.empty()) end = end_of_turn(tokenizer, *chat);
            const auto encode = [&](const char* key) {
                Json messages = r["prompt"];
                for (const Json& m : answer_messages(r[key], key, where)) messages.push_back(m);
                return encode_conversation(messages, tokenizer, *chat, end, where, r["prompt"].size());
            };
            pair.chosen = encode("chosen");
            pair.rejected = encode("rejected");
            ++out.conversations;
        }
        pair.prompt_tokens = std::min(prompt_length(pair.chosen), prompt_length(pair.rejected));
        LEVERS_CHECK(pair.prompt_tokens < context, "{}: the prompt is {} tokens, which leaves no room for an answer "
                     "in the context of {} (--set context= more, or a shorter prompt)", where, pair.prompt_tokens,
                     context);
        for (SftExample* e : {&pair.chosen, &pair.rejected})
            if (static_cast<std::int64_t>(e->ids.size()) > context + 1) {
                e->ids.resize(static_cast<std::size_t>(context + 1));
                e->learned.resize(e->ids.size());
                ++out.truncated;
            }
        out.pairs.push_back(std::move(pair));
    });
    LEVERS_CHECK(!out.pairs.empty(), "{} has no preference pairs (one JSON object per line)", path.string());
    return out;
}

PreferenceRows make_preference_rows(const std::vector<PreferencePair>& pairs, std::int64_t context, bool packing) {
    LEVERS_CHECK(context >= 1, "the context must be at least 1 position, got {}", context);
    PreferenceRows out;
    out.rows.context = context;
    out.pairs = static_cast<std::int64_t>(pairs.size());
    std::int64_t used = context;  // positions filled in the current row (full: the next sequence opens one)
    const auto pad_row = [&] {
        if (out.sequences.empty()) return;
        const auto own = static_cast<std::int32_t>(out.sequences.back().size());  // padding: a document of its own
        for (; used < context; ++used) {
            out.rows.tokens.push_back(0);
            out.rows.targets.push_back(kIgnoredTarget);
            out.rows.documents.push_back(own);
            out.rows.real.push_back(0);
        }
    };
    const auto open_row = [&](bool new_pack) {
        pad_row();
        if (new_pack) out.pack_start.push_back(static_cast<std::int64_t>(out.sequences.size()));
        out.sequences.emplace_back();
        used = 0;
    };
    const auto put = [&](const SftExample& e, PreferenceRows::Sequence s) {
        const auto document = static_cast<std::int32_t>(out.sequences.back().size());
        for (std::size_t k = 0; k + 1 < e.ids.size(); ++k) {
            out.rows.tokens.push_back(e.ids[k]);
            out.rows.targets.push_back(e.learned[k + 1] ? e.ids[k + 1] : kIgnoredTarget);
            out.rows.documents.push_back(document);
            out.rows.real.push_back(1);
        }
        used += static_cast<std::int64_t>(e.ids.size()) - 1;
        out.sequences.back().push_back(s);
    };
    for (std::size_t k = 0; k < pairs.size(); ++k) {
        const auto pair = static_cast<std::int64_t>(k);
        const std::int64_t both = static_cast<std::int64_t>(pairs[k].chosen.ids.size() + pairs[k].rejected.ids.size()) - 2;
        if (packing && both <= context) {
            if (used + both > context) open_row(true);
            put(pairs[k].chosen, {pair, true});
            put(pairs[k].rejected, {pair, false});
        } else {
            open_row(true);
            put(pairs[k].chosen, {pair, true});
            open_row(false);
            put(pairs[k].rejected, {pair, false});
            pad_row();
            used = context;  // a pack of two rows takes nothing more
        }
    }
    pad_row();
    out.pack_start.push_back(static_cast<std::int64_t>(out.sequences.size()));
    return out;
}

PreferenceBatch packs_at(const PreferenceRows& rows, const std::vector<std::int64_t>& which) {
    std::vector<std::int64_t> row_list;
    for (const std::int64_t p : which)
        for (std::int64_t r = rows.pack_start[static_cast<std::size_t>(p)]; r < rows.pack_start[static_cast<std::size_t>(p) + 1]; ++r)
            row_list.push_back(r);
    PreferenceBatch out;
    out.rows = rows_at(rows.rows, row_list);
    for (const std::int64_t r : row_list)
        out.slots = std::max<std::int64_t>(out.slots, static_cast<std::int64_t>(rows.sequences[static_cast<std::size_t>(r)].size()) + 1);
    const std::int64_t t = rows.rows.context;
    std::vector<std::int32_t> slot(row_list.size() * static_cast<std::size_t>(t));
    std::map<std::int64_t, std::size_t> place;  // a pair's index in the batch's lists
    for (std::size_t b = 0; b < row_list.size(); ++b) {
        const auto r = static_cast<std::size_t>(row_list[b]);
        for (std::int64_t i = 0; i < t; ++i)
            slot[b * static_cast<std::size_t>(t) + static_cast<std::size_t>(i)] = static_cast<std::int32_t>(
                static_cast<std::int64_t>(b) * out.slots + rows.rows.documents[r * static_cast<std::size_t>(t) + static_cast<std::size_t>(i)]);
        const auto& seqs = rows.sequences[r];
        for (std::size_t d = 0; d < seqs.size(); ++d) {
            auto [at, fresh] = place.try_emplace(seqs[d].pair, out.pair.size());
            if (fresh) {
                out.pair.push_back(seqs[d].pair);
                out.chosen_slot.push_back(-1);
                out.rejected_slot.push_back(-1);
            }
            (seqs[d].chosen ? out.chosen_slot : out.rejected_slot)[at->second] =
                static_cast<std::int32_t>(static_cast<std::int64_t>(b) * out.slots + static_cast<std::int64_t>(d));
        }
    }
    out.slot = Tensor::from(slot, {static_cast<std::int64_t>(slot.size())});
    return out;
}

PreferenceBatches::PreferenceBatches(const PreferenceRows& rows, std::int64_t per_rank, std::uint64_t seed, int world,
                                     int rank)
    : rows_(rows), batcher_(rows.packs(), per_rank, seed, Batcher::Order::epochs, world, rank) {}

PreferenceBatch PreferenceBatches::next() { return packs_at(rows_, batcher_.next()); }
nlohmann::json PreferenceBatches::save_state() const { return batcher_.save_state(); }
void PreferenceBatches::load_state(const nlohmann::json& j) { batcher_.load_state(j); }

}  // namespace levers::data
