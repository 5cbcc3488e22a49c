#include "levers/models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace levers::models {

std::int32_t sample_token(const float* logits, int vocab, const SampleOptions& options, Rng& rng) {
    LEVERS_CHECK(options.temperature >= 0 && std::isfinite(options.temperature),
                 "temperature must be >= 0 (0: greedy), got {}", options.temperature);
    LEVERS_CHECK(options.top_k >= 0, "top_k must be >= 0, got {}", options.top_k);
    LEVERS_CHECK(options.top_p > 0 && options.top_p <= 1, "top_p must be in (0, 1], got {}", options.top_p);
    if (options.temperature == 0)  // greedy, as transformers' do_sample=False and llama.cpp's --temp 0: no draw
        return static_cast<std::int32_t>(std::max_element(logits, logits + vocab) - logits);
    if ((options.top_k == 0 || options.top_k >= vocab) && options.top_p >= 1) {
        // The whole vocabulary: a draw from the softmax in token order, nothing to sort (GRPO's rollouts).
        const double top = *std::max_element(logits, logits + vocab);
        std::vector<double> weight(static_cast<std::size_t>(vocab));
        double total = 0;
        for (int i = 0; i < vocab; ++i) total += weight[static_cast<std::size_t>(i)] = std::exp((logits[i] - top) / options.temperature);
        double u = rng.uniform() * total;
        for (int i = 0; i < vocab; ++i) {
            if (u < weight[static_cast<std::size_t>(i)]) return i;
            u -= weight[static_cast<std::size_t>(i)];
        }
        return static_cast<std::int32_t>(std::max_element(logits, logits + vocab) - logits);  // rounding's leftover
    }
    std::vector<int> order(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::size_t keep = options.top_k == 0 ? order.size() : std::min<std::size_t>(order.size(), static_cast<std::size_t>(options.top_k));
    const bool nucleus = options.top_p < 1;
    // Sorted: the k kept, or every token when top-p must find where its mass ends.
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(nucleus ? order.size() : keep),
                      order.end(), [&](int a, int b) { return logits[a] > logits[b]; });
    const double top = logits[order[0]];
    std::vector<double> weight(keep);
    for (std::size_t i = 0; i < keep; ++i) weight[i] = std::exp((logits[order[i]] - top) / options.temperature);
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    if (nucleus) {  // the fewest likeliest tokens whose probability reaches top_p
        double mass = 0;
        std::size_t n = 0;
        while (n < keep && mass < options.top_p * total) mass += weight[n++];
        keep = std::max<std::size_t>(n, 1);
        weight.resize(keep);
    }
    double u = rng.uniform() * std::accumulate(weight.begin(), weight.end(), 0.0);
    for (std::size_t i = 0; i < keep; ++i) {
        if (u < weight[i]) return order[i];
        u -= weight[i];
    }
    return order[keep - 1];
}

std::vector<std::int32_t> generate(LanguageModel& model, std::vector<std::int32_t> prompt,
                                   const SampleOptions& options, Rng& rng) {
    LEVERS_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
    LEVERS_CHECK(options.max_new_tokens >= 0, "max_new_tokens must be >= 0, got {}", options.max_new_tokens);
    autograd::InferenceMode inference;  // nothing recorded, nothing saved
    const bool was_training = model.training();
    model.eval();
    const auto vocab = static_cast<int>(model.vocab_size());
    auto decoder = model.decoder(static_cast<std::int64_t>(prompt.size()) + options.max_new_tokens);
    std::vector<std::int32_t> fresh = prompt;  // what the decoder has not seen yet
    for (int n = 0; n < options.max_new_tokens; ++n) {
        const Tensor logits = decoder->next(fresh);
        const std::int32_t token = sample_token(logits.data<float>(), vocab, options, rng);
        prompt.push_back(token);
        if (std::find(options.stop.begin(), options.stop.end(), token) != options.stop.end()) break;
        fresh.assign(1, token);
    }
    model.train(was_training);
    return prompt;
}

}  // namespace levers::models
