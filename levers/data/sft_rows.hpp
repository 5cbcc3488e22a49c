// SFT examples (sft_data.hpp) laid out for training: rows of `context`
// positions, each an example's tokens and next-token targets (-100 where the
// next token is not learned), several examples to a row when packing (each
// its own document: attention stays within it and positions restart, so a
// packed row computes what its examples would alone), one per row
// otherwise; the rest of a row is padding no target counts. Then the rows a
// rank trains on, step after step, through a Batcher (resumable).
#pragma once

#include "levers/core/tensor.hpp"
#include "levers/data/batcher.hpp"
#include "levers/data/sft_data.hpp"

#include <optional>
#include <string>

namespace levers::data {

constexpr std::int32_t kIgnoredTarget = -100;

struct SftRows {
    std::int64_t context = 0;
    std::vector<std::int32_t> tokens, targets, documents;  // rows x context each
    std::vector<std::uint8_t> real;                        // rows x context: 1 where an example is, 0 in padding
    std::int64_t dropped = 0, truncated = 0;              // examples longer than the context, or with nothing to learn
    std::int64_t rows() const { return context ? static_cast<std::int64_t>(tokens.size()) / context : 0; }
    std::int64_t learned() const;  // targets that count
};

// Examples longer than the context (more than context + 1 tokens): dropped, or cut to fit.
enum class TooLong { drop, truncate };

// The examples in order, packed or one per row. Examples with nothing left
// to learn (after cutting) are dropped too.
SftRows make_rows(const std::vector<SftExample>& examples, std::int64_t context, bool packing, TooLong too_long);

struct SftBatch {
    Tensor tokens, targets, documents;  // i32 [batch, context]
    std::int64_t real_tokens = 0;       // positions holding examples (not padding)
};

// Rows `which` as tensors on the host.
SftBatch rows_at(const SftRows& rows, const std::vector<std::int64_t>& which);

// "3 rows of 1024 positions, fewer than a step's 8 ...: each step takes them
// more than once" where the rows are fewer than a step takes, else "".
std::string repeated_rows_note(const SftRows& rows, std::int64_t per_rank, int world);

class SftBatches {
public:
    // Fewer rows than a step takes (per_rank x world) repeat within it, as
    // epochs follow each other (repeated_rows_note says so).
    SftBatches(const SftRows& rows, std::int64_t per_rank, std::uint64_t seed, int world, int rank);
    SftBatch next();
    nlohmann::json save_state() const;
    void load_state(const nlohmann::json& j);

private:
    const SftRows& rows_;
    Batcher batcher_;
};

}  // namespace levers::data
