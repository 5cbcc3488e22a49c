#include "models/generate.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace levers::models {

std::int32_t sample_token(const float* logits, int vocab, const SampleOptions& options, Rng& rng) {
    LEVERS_CHECK(options.temperature > 0, "temperature must be > 0, got {}", options.temperature);
    LEVERS_CHECK(options.top_k >= 0, "top_k must be >= 0, got {}", options.top_k);
    std::vector<int> order(static_cast<std::size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::size_t keep = options.top_k == 0 ? order.size() : std::min<std::size_t>(order.size(), static_cast<std::size_t>(options.top_k));
    std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                      [&](int a, int b) { return logits[a] > logits[b]; });
    const double top = logits[order[0]];
    std::vector<double> weight(keep);
    for (std::size_t i = 0; i < keep; ++i) weight[i] = std::exp((logits[order[i]] - top) / options.temperature);
    double u = rng.uniform() * std::accumulate(weight.begin(), weight.end(), 0.0);
    for (std::size_t i = 0; i < keep; ++i) {
        if (u < weight[i]) return order[i];
        u -= weight[i];
    }
    return order[keep - 1];
}

std::vector<std::int32_t> generate(Gpt& model, std::vector<std::int32_t> prompt, const SampleOptions& options,
                                   Rng& rng) {
    LEVERS_CHECK(!prompt.empty(), "generation needs a prompt of at least one token");
    autograd::InferenceMode inference;  // nothing recorded, nothing saved
    const bool was_training = model.training();
    model.eval();
    const int block = model.config().block_size, vocab = model.config().vocab_size;
    std::vector<std::int32_t> window;
    for (int n = 0; n < options.max_new_tokens; ++n) {
        const std::int64_t t = std::min<std::int64_t>(static_cast<std::int64_t>(prompt.size()), block);
        window.assign(prompt.end() - t, prompt.end());
        const Tensor logits = model.next_logits(Tensor::from(window, {1, t})).to(Device::cpu(), DType::f32);
        prompt.push_back(sample_token(logits.data<float>(), vocab, options, rng));
    }
    model.train(was_training);
    return prompt;
}

}  // namespace levers::models
