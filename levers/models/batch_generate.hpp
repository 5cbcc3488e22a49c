// Many sequences generated together through one KV cache (GRPO's rollouts,
// a sweep of prompts): prompts of different lengths are padded on the left
// and the padding unseen, so each row computes what it would alone (rotary
// embeddings see only distances); a prompt given several times (a GRPO
// group's) is computed once and its cache shared; every step decodes one
// token of every row still going, each stopping on its own, and a finished
// row leaves the batch (its cache rows dropped), so it costs nothing more.
#pragma once

#include "levers/core/rng.hpp"
#include "levers/models/generate.hpp"
#include "levers/models/llama.hpp"

#include <cstdint>
#include <vector>

namespace levers::models {

struct BatchGeneration {
    std::vector<std::vector<std::int32_t>> completions;  // per prompt: the tokens generated (a stop token kept)
    std::vector<bool> stopped;                           // per prompt: ended on a stop token (else on the budget)
    std::int64_t row_steps = 0;  // rows decoded after the prompts, summed over steps (the work done)
};

// Generates for every prompt (none empty) with the options' sampling and
// stop tokens; tokens are drawn from `rng` row by row in prompt order each
// step. Under InferenceMode; the model is left as it was (training or not).
// Phi-3's longrope picks its factors by the padded length (the longest
// prompt's) where the rows' own lengths would pick differently.
BatchGeneration generate_batch(Llama& model, const std::vector<std::vector<std::int32_t>>& prompts,
                               const SampleOptions& options, Rng& rng);
// The same with a generator per prompt (`rngs[i]` draws prompt i's tokens),
// so what a row draws does not depend on the rows beside it: GRPO's groups
// sample alike on one rank or spread over several.
BatchGeneration generate_batch(Llama& model, const std::vector<std::vector<std::int32_t>>& prompts,
                               const SampleOptions& options, std::vector<Rng>& rngs);

}  // namespace levers::models
