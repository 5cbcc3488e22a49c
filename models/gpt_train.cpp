#include "models/gpt_train.hpp"

#include "framework/dist/context.hpp"
#include "framework/dist/sample_means.hpp"

#include <algorithm>

namespace levers::models {

TokenWindows::TokenWindows(data::TokenFile tokens, std::int64_t per_rank, std::int64_t time, std::uint64_t seed)
    : tokens_(std::move(tokens)),
      time_(time),
      batcher_(data::window_starts(tokens_, time), per_rank, seed, data::Batcher::Order::random, dist::world_size(),
               dist::rank()) {}

data::TokenBatch TokenWindows::next() { return data::windows_at(tokens_, batcher_.next(), time_); }

double mean_loss(Gpt& model, const data::TokenFile& tokens, std::int64_t batch, std::int64_t time, long max_batches) {
    // Non-overlapping windows with a next-token target for each position: all
    // of them, or max_batches x batch spread evenly.
    const std::int64_t total = (tokens.size() - 1) / time;
    std::int64_t count = total, stride = 1;
    if (max_batches > 0 && max_batches * batch < total) {
        count = max_batches * batch;
        stride = total / count;
    }
    LEVERS_CHECK(count > 0, "the validation split ({} tokens) is shorter than one window of {}", tokens.size(), time);
    // This rank's contiguous share of the windows, in batches (the last may be short).
    const auto [lo, hi] = dist::Backend::chunk(count, dist::world_size(), dist::rank());
    dist::SampleMeans loss({"loss"});
    autograd::InferenceMode inference;  // evaluation records nothing and saves nothing
    const bool was_training = model.training();
    model.eval();
    std::vector<std::int64_t> starts;
    for (std::int64_t first = lo; first < hi; first += batch) {
        const std::int64_t n = std::min(batch, hi - first);
        starts.resize(static_cast<std::size_t>(n));
        for (std::int64_t w = 0; w < n; ++w) starts[static_cast<std::size_t>(w)] = (first + w) * stride * time;
        const data::TokenBatch b = data::windows_at(tokens, starts, time);
        // Windows are equally long, so the mean over windows is the mean over tokens.
        const double mean = model.loss(b.inputs, b.targets).item();
        loss.add("loss", mean * static_cast<double>(n), static_cast<double>(n));
    }
    model.train(was_training);
    return loss.means().at("loss");
}

}  // namespace levers::models
