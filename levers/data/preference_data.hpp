// Preference data for DPO and its relatives: pairs of answers to one prompt,
// read from a JSON-lines file in TRL's forms, one object per line:
//
//   {"prompt": "text", "chosen": "text", "rejected": "text"}      plain text, no template
//   {"prompt": [{"role": "user", ...}, ...],                        a conversation, rendered
//    "chosen": [{"role": "assistant", ...}], "rejected": [...]}    through the chat template
//
// (in a conversation, chosen and rejected may be strings: one assistant
// turn each). Each answer becomes the prompt's tokens followed by its own,
// only the answer's counted (SftExample::learned), as sft counts the
// assistant's. Then the pairs laid out in rows: chosen and rejected of a
// pair always together in one batch, packed several pairs to a row as sft
// packs examples, or each sequence a row of its own.
#pragma once

#include "levers/core/tensor.hpp"
#include "levers/data/batcher.hpp"
#include "levers/data/sft_data.hpp"
#include "levers/data/sft_rows.hpp"

#include <cstdint>
#include <filesystem>
#include <vector>

namespace levers::data {

struct PreferencePair {
    SftExample chosen, rejected;  // prompt then answer; learned: the answer's tokens (and end of turn)
    std::int64_t prompt_tokens = 0;
};

struct PreferenceFile {
    std::vector<PreferencePair> pairs;
    std::int64_t conversations = 0, texts = 0;
    std::int64_t truncated = 0;  // answers cut so that prompt and answer fit the context
};

// Reads `path`. Throws levers::Error naming the file and line of the first
// bad one: not JSON, no "prompt", "chosen" or "rejected", chosen equal to
// rejected, a prompt that leaves no room for an answer in `context`
// positions, a conversation without a template to render it. Answers longer
// than the room left are cut (counted in `truncated`).
PreferenceFile read_preference_file(const std::filesystem::path& path, const BpeTokenizer& tokenizer,
                                    const ChatTemplate* chat, std::int64_t context);

// The pairs in rows of `context` positions. A pack is what the batcher
// draws: with packing, one row holding whole pairs (documents 2k and 2k+1
// of the row are pair k's chosen and rejected); without, or for a pair too
// long to share a row, two rows (chosen, rejected), each one document.
struct PreferenceRows {
    struct Sequence {
        std::int64_t pair = 0;  // index into the pairs laid out
        bool chosen = true;
    };
    SftRows rows;                                   // documents numbered from 0 in each row
    std::vector<std::vector<Sequence>> sequences;   // per row, by document
    std::vector<std::int64_t> pack_start;           // pack k: rows [pack_start[k], pack_start[k + 1])
    std::int64_t packs() const { return static_cast<std::int64_t>(pack_start.size()) - 1; }
    std::int64_t pairs = 0;
};
PreferenceRows make_preference_rows(const std::vector<PreferencePair>& pairs, std::int64_t context, bool packing);

// Packs `which` as tensors on the host, with where each sequence's sum goes:
// sequence slot of each position (row x slots_per_row + document, i32 [rows x
// context]) and each pair's chosen and rejected slot, in pair order.
struct PreferenceBatch {
    SftBatch rows;
    Tensor slot;  // i32 [rows * context]
    std::int64_t slots = 0;
    std::vector<std::int32_t> chosen_slot, rejected_slot;
    std::vector<std::int64_t> pair;  // the pairs, as PreferenceRows numbers them
};
PreferenceBatch packs_at(const PreferenceRows& rows, const std::vector<std::int64_t>& which);

// The packs a rank trains on, step after step (a Batcher over packs: resumable).
class PreferenceBatches {
public:
    PreferenceBatches(const PreferenceRows& rows, std::int64_t per_rank, std::uint64_t seed, int world, int rank);
    PreferenceBatch next();
    nlohmann::json save_state() const;
    void load_state(const nlohmann::json& j);

private:
    const PreferenceRows& rows_;
    Batcher batcher_;
};

}  // namespace levers::data
