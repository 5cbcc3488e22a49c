#include "models/gpt_train.hpp"

#include "framework/dist/context.hpp"

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
    const auto windows = static_cast<std::int64_t>(tokens.size()) / time;
    const std::int64_t stride = max_batches <= 0 ? 1 : std::max<std::int64_t>(1, windows / (max_batches * batch));
    data::TokenBatch b;
    std::vector<double> sums = {0, 0};  // loss total, batches
    for (long n = dist::rank(); (max_batches <= 0 || n < max_batches) &&
                                data::sequential_batch(tokens, batch, time, n, b, stride);
         n += dist::world_size()) {
        sums[0] += model.forward(b.inputs.data(), b.targets.data(), batch, time);
        sums[1] += 1;
    }
    dist::all_reduce_sum(sums);
    LEVERS_CHECK(sums[1] > 0, "the validation split ({} tokens) is shorter than one batch of {}x{}", tokens.size(),
                 batch, time);
    return sums[0] / sums[1];
}

}  // namespace levers::models
