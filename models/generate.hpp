// Sampling text from a GPT: temperature and top-k, one token at a time over a
// sliding window of the last block_size tokens.
#pragma once

#include "framework/core/rng.hpp"
#include "models/gpt.hpp"

#include <cstdint>
#include <vector>

namespace levers::models {

struct SampleOptions {
    int max_new_tokens = 200;
    double temperature = 1.0;  // > 0; lower is more conservative
    int top_k = 0;             // 0 keeps the whole vocabulary
};

// Returns prompt followed by max_new_tokens sampled tokens. prompt must not be empty.
std::vector<std::int32_t> generate(Gpt& model, std::vector<std::int32_t> prompt, const SampleOptions& options,
                                   Rng& rng);

// Draws one token from logits[vocab] with the options' temperature and top-k.
std::int32_t sample_token(const float* logits, int vocab, const SampleOptions& options, Rng& rng);

}  // namespace levers::models
