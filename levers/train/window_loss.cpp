#include "levers/train/window_loss.hpp"

#include "levers/core/autograd.hpp"
#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"
#include "levers/distributed/sample_means.hpp"

#include <algorithm>

namespace levers::train {

double mean_window_loss(nn::Module& model, const data::TokenFile& tokens, std::int64_t batch, std::int64_t time,
                        long max_batches, const std::function<double(const data::TokenBatch&)>& mean_loss) {
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
        // Windows are equally long, so the mean over windows is the mean over tokens.
        const double mean = mean_loss(data::windows_at(tokens, starts, time));
        loss.add("loss", mean * static_cast<double>(n), static_cast<double>(n));
    }
    model.train(was_training);
    return loss.means().at("loss");
}

}  // namespace levers::train
