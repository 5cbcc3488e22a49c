// A tokenised text corpus with a train/validation split, and the batches
// language models train on.
#pragma once

#include "framework/core/rng.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <vector>

namespace levers::data {

struct TextCorpus {
    std::vector<std::int32_t> train, validation;
};

// Byte-level corpus from every *.txt file in `dir` (or one file). The last
// `validation_fraction` of each file is held out, so validation spans every
// book. Throws, naming the file, if one is empty or is not text (NUL bytes).
TextCorpus load_byte_corpus(const std::filesystem::path& dir_or_file, double validation_fraction);
// The same with any tokenizer (GPT-2's BPE for GPT-2 weights).
TextCorpus load_text_corpus(const std::filesystem::path& dir_or_file, double validation_fraction,
                            const std::function<std::vector<std::int32_t>(const std::string&)>& encode);

// Inputs and next-token targets, each [batch, time].
struct TokenBatch {
    std::vector<std::int32_t> inputs, targets;
    std::int64_t batch = 0, time = 0;
};

// `batch` windows of time+1 tokens at uniformly random offsets.
TokenBatch random_batch(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time, Rng& rng);

// The `index`-th batch of non-overlapping windows `stride` windows apart
// (stride 1: consecutive), a fixed evaluation set; a stride > 1 spreads a few
// batches over the whole split. Returns false once the tokens are used up.
bool sequential_batch(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time,
                      std::int64_t index, TokenBatch& out, std::int64_t stride = 1);

}  // namespace levers::data
