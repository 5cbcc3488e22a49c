#include "recipes/rollouts.hpp"

#include "levers/core/error.hpp"
#include "levers/distributed/context.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace levers::recipes {

nlohmann::json Rollout::to_json() const {
    return {{"prompt", prompt}, {"completion", completion}, {"stopped", stopped}, {"advantage", advantage},
            {"old_logps", old_logps}, {"ref_logps", ref_logps}};
}

Rollout Rollout::from_json(const nlohmann::json& j) {
    Rollout r;
    j.at("prompt").get_to(r.prompt);
    j.at("completion").get_to(r.completion);
    j.at("stopped").get_to(r.stopped);
    j.at("advantage").get_to(r.advantage);
    j.at("old_logps").get_to(r.old_logps);
    j.at("ref_logps").get_to(r.ref_logps);
    return r;
}

RolloutRows rollout_rows(const Rollout& r, const std::vector<data::Prompt>& prompts, bool mask_truncated) {
    const std::int64_t n = r.size();
    const auto prompt_of = [&](std::int64_t i) -> const std::vector<std::int32_t>& {
        return prompts[static_cast<std::size_t>(r.prompt[static_cast<std::size_t>(i)])].ids;
    };
    std::size_t longest = 0;
    for (std::int64_t i = 0; i < n; ++i)
        longest = std::max(longest, prompt_of(i).size() + r.completion[static_cast<std::size_t>(i)].size());
    const auto length = static_cast<std::int64_t>(longest);
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(n * length), 0), targets(tokens.size(), -100);
    std::vector<float> mask(tokens.size(), 0.0f);
    RolloutRows out;
    for (std::int64_t i = 0; i < n; ++i) {
        const auto& p = prompt_of(i);
        const auto& c = r.completion[static_cast<std::size_t>(i)];
        const auto row = static_cast<std::size_t>(i * length);
        std::copy(p.begin(), p.end(), tokens.begin() + static_cast<long>(row));
        std::copy(c.begin(), c.end(), tokens.begin() + static_cast<long>(row + p.size()));
        const std::int64_t first = static_cast<std::int64_t>(p.size()) - 1;  // predicts the completion's first token
        out.first.push_back(first);
        const float counted = mask_truncated && !r.stopped[static_cast<std::size_t>(i)] ? 0.0f : 1.0f;
        for (std::size_t k = 0; k < c.size(); ++k) {
            targets[row + static_cast<std::size_t>(first) + k] = c[k];
            mask[row + static_cast<std::size_t>(first) + k] = counted;
        }
    }
    out.tokens = Tensor::from(tokens, {n, length});
    out.targets = Tensor::from(targets, {n, length});
    out.mask = Tensor::from(mask, {n, length});
    return out;
}

namespace {
// Calls fn with the [completions, T] offset of each completion token, completion after completion.
template <class Fn> void each_token(const Rollout& r, const RolloutRows& rows, Fn fn) {
    const std::int64_t length = rows.tokens.dim(1);
    for (std::int64_t i = 0; i < r.size(); ++i) {
        const auto start = static_cast<std::size_t>(i * length + rows.first[static_cast<std::size_t>(i)]);
        for (std::size_t k = 0; k < r.completion[static_cast<std::size_t>(i)].size(); ++k) fn(start + k);
    }
}
}  // namespace

Tensor spread(const std::vector<float>& per_token, const Rollout& r, const RolloutRows& rows) {
    std::vector<float> out(static_cast<std::size_t>(rows.tokens.numel()), 0.0f);
    std::size_t at = 0;
    each_token(r, rows, [&](std::size_t offset) { out[offset] = per_token.at(at++); });
    LEVERS_CHECK(at == per_token.size(), "a rollout's {} numbers for {} completion tokens", per_token.size(), at);
    return Tensor::from(out, rows.tokens.shape());
}

std::vector<float> gather(const Tensor& laid_out, const Rollout& r, const RolloutRows& rows) {
    const Tensor host = laid_out.to(Device::cpu(), DType::f32).contiguous();
    std::vector<float> out;
    each_token(r, rows, [&](std::size_t offset) { out.push_back(host.data<float>()[offset]); });
    return out;
}

std::vector<std::vector<double>> score(const Rollout& r, const std::vector<std::string>& texts,
                                       const std::vector<data::Prompt>& prompts,
                                       const std::vector<WeightedReward>& rewards) {
    std::vector<std::vector<double>> out;
    for (std::int64_t i = 0; i < r.size(); ++i) {
        const auto ix = static_cast<std::size_t>(i);
        const data::Prompt& p = prompts[static_cast<std::size_t>(r.prompt[ix])];
        const train::Completion c{.text = texts[ix], .record = &p.record,
                                  .tokens = static_cast<std::int64_t>(r.completion[ix].size()), .stopped = r.stopped[ix]};
        std::vector<double> values;
        for (const WeightedReward& w : rewards) {
            double v = 0;
            try {
                v = w.fn(c);
            } catch (const Error& e) {  // its message without levers' source location
                LEVERS_FAIL("the reward {} failed on the prompt at {}: {}", w.name, p.where, e.message());
            } catch (const std::exception& e) {
                LEVERS_FAIL("the reward {} failed on the prompt at {}: {}", w.name, p.where, e.what());
            }
            LEVERS_CHECK(std::isfinite(v), "the reward {} gave {} for the prompt at {} (a reward must be finite)",
                         w.name, v, p.where);
            values.push_back(v);
        }
        out.push_back(std::move(values));
    }
    return out;
}

std::vector<double> total_rewards(const std::vector<std::vector<double>>& rewards,
                                  const std::vector<WeightedReward>& names) {
    std::vector<double> out;
    for (const auto& values : rewards) {
        double sum = 0;
        for (std::size_t j = 0; j < names.size(); ++j) sum += names[j].weight * values[j];
        out.push_back(sum);
    }
    return out;
}

namespace {
// The mean and the sample standard deviation (torch.std's) of sums over every rank.
std::pair<double, double> mean_std(double sum, double squares, double n) {
    const double mean = n > 0 ? sum / n : 0;
    const double var = n > 1 ? std::max(0.0, (squares - n * mean * mean) / (n - 1)) : 0;
    return {mean, std::sqrt(var)};
}
}  // namespace

train::Metrics rollout_metrics(const std::vector<std::vector<double>>& rewards, const std::vector<Rollout>& step,
                               const std::vector<WeightedReward>& names, std::int64_t group) {
    const std::vector<double> total = total_rewards(rewards, names);
    // Sums over this rank, then over all: per reward (sum, squares), the total's, groups' std and zero-std
    // counts, completions, their tokens and those cut at the budget.
    const std::size_t k = names.size();
    std::vector<double> sums(2 * k + 7, 0.0);
    for (std::size_t i = 0; i < total.size(); ++i) {
        for (std::size_t j = 0; j < k; ++j) {
            sums[2 * j] += rewards[i][j];
            sums[2 * j + 1] += rewards[i][j] * rewards[i][j];
        }
        sums[2 * k] += total[i];
        sums[2 * k + 1] += total[i] * total[i];
    }
    for (std::size_t g = 0; g + static_cast<std::size_t>(group) <= total.size(); g += static_cast<std::size_t>(group)) {
        double s = 0, q = 0;
        for (std::size_t i = g; i < g + static_cast<std::size_t>(group); ++i) {
            s += total[i];
            q += total[i] * total[i];
        }
        const double sd = mean_std(s, q, static_cast<double>(group)).second;
        sums[2 * k + 2] += sd;
        sums[2 * k + 3] += sd < 1e-12 ? 1 : 0;
    }
    double shortest = std::numeric_limits<double>::max(), longest = 0;
    for (const Rollout& r : step)
        for (std::int64_t i = 0; i < r.size(); ++i) {
            const auto n = static_cast<double>(r.completion[static_cast<std::size_t>(i)].size());
            sums[2 * k + 4] += 1;
            sums[2 * k + 5] += n;
            sums[2 * k + 6] += r.stopped[static_cast<std::size_t>(i)] ? 0 : 1;
            shortest = std::min(shortest, n);
            longest = std::max(longest, n);
        }
    // The extremes over ranks through sums: each rank its own slots.
    const auto world = static_cast<std::size_t>(dist::world_size()), me = static_cast<std::size_t>(dist::rank());
    std::vector<double> extremes(2 * world, 0.0);
    extremes[2 * me] = shortest;
    extremes[2 * me + 1] = longest;
    sums.insert(sums.end(), extremes.begin(), extremes.end());
    dist::all_reduce_sum(sums);
    const double completions = sums[2 * k + 4], groups = completions / static_cast<double>(group);
    train::Metrics out;
    for (std::size_t j = 0; j < k; ++j) {
        const auto [mean, sd] = mean_std(sums[2 * j], sums[2 * j + 1], completions);
        out["rewards/" + names[j].name + "/mean"] = mean;
        out["rewards/" + names[j].name + "/std"] = sd;
    }
    const double mean = mean_std(sums[2 * k], sums[2 * k + 1], completions).first;
    out["reward"] = mean;
    out["reward_std"] = sums[2 * k + 2] / groups;
    out["frac_reward_zero_std"] = sums[2 * k + 3] / groups;
    out["completions/mean_length"] = sums[2 * k + 5] / completions;
    out["completions/clipped_ratio"] = sums[2 * k + 6] / completions;
    double lo = std::numeric_limits<double>::max(), hi = 0;
    for (std::size_t r = 0; r < world; ++r) {
        lo = std::min(lo, sums[2 * k + 7 + 2 * r]);
        hi = std::max(hi, sums[2 * k + 7 + 2 * r + 1]);
    }
    out["completions/min_length"] = lo;
    out["completions/max_length"] = hi;
    return out;
}

Rng completion_rng(std::uint64_t seed, std::int64_t round, std::int64_t place, std::int64_t k) {
    // splitmix64's finaliser over the four numbers, one after another.
    std::uint64_t h = seed;
    for (const std::uint64_t v : {static_cast<std::uint64_t>(round), static_cast<std::uint64_t>(place),
                                  static_cast<std::uint64_t>(k)}) {
        h += 0x9e3779b97f4a7c15ULL + v;
        h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
        h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
        h ^= h >> 31;
    }
    return Rng(h);
}

}  // namespace levers::recipes
