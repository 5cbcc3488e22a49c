// A tokenised text corpus with a train/validation split, and the batches
// language models train on. A node holds a corpus once: its tokens are
// written to the data cache (mapped_file.hpp) the first time and mapped by
// every rank after, bytes as bytes, other tokens as i32; batches are read
// out of the mapping.
#pragma once

#include "levers/core/rng.hpp"
#include "levers/core/tensor.hpp"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace levers::data {

// Tokens in memory someone keeps alive (a mapped cache file, or a vector).
class TokenFile {
public:
    TokenFile() = default;
    // Tokens of `width` bytes (1: bytes, 4: i32) at `data`, kept alive by `owner`.
    TokenFile(std::shared_ptr<const void> owner, const void* data, std::int64_t size, int width);
    static TokenFile from(std::vector<std::int32_t> tokens);  // owns a copy (tests, small texts)

    std::int64_t size() const { return size_; }
    std::int32_t operator[](std::int64_t i) const {
        return width_ == 1 ? static_cast<const std::uint8_t*>(data_)[i] : static_cast<const std::int32_t*>(data_)[i];
    }
    // tokens [start, start + n) into out.
    void copy(std::int64_t start, std::int64_t n, std::int32_t* out) const;
    std::vector<std::int32_t> to_vector() const;

private:
    std::shared_ptr<const void> owner_;
    const void* data_ = nullptr;
    std::int64_t size_ = 0;
    int width_ = 4;
};

struct TextCorpus {
    TokenFile train, validation;
};

// Byte-level corpus from every *.txt file in `dir` (or one file). The last
// `validation_fraction` of each file is held out, so validation spans every
// book. Throws, naming the file, if one is empty or is not text (NUL bytes).
TextCorpus load_byte_corpus(const std::filesystem::path& dir_or_file, double validation_fraction);
// The same with any tokenizer (GPT-2's BPE for GPT-2 weights); `tokenizer`
// names it for the cache (a different tokenizer makes other tokens).
TextCorpus load_text_corpus(const std::filesystem::path& dir_or_file, double validation_fraction,
                            const std::function<std::vector<std::int32_t>(const std::string&)>& encode,
                            const std::string& tokenizer);

// Inputs and next-token targets, each [batch, time] i32 host tensors.
struct TokenBatch {
    Tensor inputs, targets;
    std::int64_t batch = 0, time = 0;
};

// How many windows of time+1 tokens start in `tokens` (each start < size - time - 1).
std::int64_t window_starts(const TokenFile& tokens, std::int64_t time);
// The windows of time+1 tokens at `starts`: inputs and next-token targets.
TokenBatch windows_at(const TokenFile& tokens, const std::vector<std::int64_t>& starts, std::int64_t time);

// `batch` windows of time+1 tokens at uniformly random offsets.
TokenBatch random_batch(const TokenFile& tokens, std::int64_t batch, std::int64_t time, Rng& rng);

// The `index`-th batch of non-overlapping windows `stride` windows apart
// (stride 1: consecutive), a fixed evaluation set; a stride > 1 spreads a few
// batches over the whole split. Returns false once the tokens are used up.
bool sequential_batch(const TokenFile& tokens, std::int64_t batch, std::int64_t time, std::int64_t index,
                      TokenBatch& out, std::int64_t stride = 1);

}  // namespace levers::data
