#include "models/gpt_train.hpp"

#include "framework/dist/context.hpp"
#include "framework/dist/sample_means.hpp"

#include <algorithm>

namespace levers::models {

data::TokenBatch rank_batch(const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time, Rng& rng) {
    auto global = data::random_batch(tokens, batch * dist::world_size(), time, rng);
    const auto first = dist::rank() * batch * time, count = batch * time;
    data::TokenBatch mine;
    mine.batch = batch;
    mine.time = time;
    mine.inputs.assign(global.inputs.begin() + first, global.inputs.begin() + first + count);
    mine.targets.assign(global.targets.begin() + first, global.targets.begin() + first + count);
    return mine;
}

double mean_loss(Gpt<float>& model, const std::vector<std::int32_t>& tokens, std::int64_t batch, std::int64_t time,
                 long max_batches) {
    // Non-overlapping windows with a next-token target for each position: all
    // of them, or max_batches x batch spread evenly.
    const std::int64_t total = (static_cast<std::int64_t>(tokens.size()) - 1) / time;
    std::int64_t count = total, stride = 1;
    if (max_batches > 0 && max_batches * batch < total) {
        count = max_batches * batch;
        stride = total / count;
    }
    LEVERS_CHECK(count > 0, "the validation split ({} tokens) is shorter than one window of {}", tokens.size(), time);
    // This rank's contiguous share of the windows, in batches (the last may be short).
    const auto [lo, hi] = dist::Backend::chunk(count, dist::world_size(), dist::rank());
    dist::SampleMeans loss({"loss"});
    std::vector<std::int32_t> inputs, targets;
    for (std::int64_t first = lo; first < hi; first += batch) {
        const std::int64_t n = std::min(batch, hi - first);
        inputs.resize(static_cast<std::size_t>(n * time));
        targets.resize(static_cast<std::size_t>(n * time));
        for (std::int64_t w = 0; w < n; ++w) {
            const auto start = tokens.begin() + (first + w) * stride * time;
            std::copy(start, start + time, inputs.begin() + w * time);
            std::copy(start + 1, start + time + 1, targets.begin() + w * time);
        }
        // Windows are equally long, so the mean over windows is the mean over tokens.
        loss.add("loss", model.forward(inputs.data(), targets.data(), n, time) * static_cast<double>(n),
                 static_cast<double>(n));
    }
    return loss.means().at("loss");
}

}  // namespace levers::models
