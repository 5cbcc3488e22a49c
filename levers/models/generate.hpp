// Sampling text from a language model: temperature, top-k and top-p, one
// token at a time through the model's decoder (a KV cache for the Llama
// family; a sliding window of the last block_size tokens for GPT-2), until
// the token budget or a stop token.
#pragma once

#include "levers/core/rng.hpp"
#include "levers/models/language_model.hpp"

#include <cstdint>
#include <vector>

namespace levers::models {

struct SampleOptions {
    int max_new_tokens = 200;
    double temperature = 1.0;  // >= 0; lower is more conservative, 0 greedy (the likeliest token, no draw)
    int top_k = 0;             // 0 keeps the whole vocabulary
    double top_p = 1.0;        // in (0, 1]: the likeliest tokens whose probabilities reach it (nucleus sampling)
    std::vector<std::int32_t> stop;  // tokens that end generation (kept in the output)
};

// Returns prompt followed by up to max_new_tokens sampled tokens (fewer when
// a stop token comes). prompt must not be empty.
std::vector<std::int32_t> generate(LanguageModel& model, std::vector<std::int32_t> prompt,
                                   const SampleOptions& options, Rng& rng);

// Draws one token from logits[vocab] with the options' temperature, top-k and
// top-p (the kept tokens sorted; the whole vocabulary, top-k 0 and top-p 1,
// drawn in token order without sorting).
std::int32_t sample_token(const float* logits, int vocab, const SampleOptions& options, Rng& rng);

}  // namespace levers::models
