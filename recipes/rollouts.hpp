// GRPO's rollouts: a step's prompts, each answered num_generations times
// together through the KV cache (models::generate_batch), the answers
// scored by the run's rewards and given their advantage within their group,
// with the log-probabilities the update compares against (the policy's at
// generation where it updates several times on them, the reference's where
// beta > 0). Kept whole in a checkpoint, so a run resumed between the
// updates of one generated batch goes on with the same answers.
#pragma once

#include "levers/core/tensor.hpp"
#include "levers/data/prompt_data.hpp"
#include "levers/models/generate.hpp"
#include "levers/train/early_stopping.hpp"
#include "levers/train/rewards.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace levers::recipes {

struct WeightedReward {
    std::string name;
    double weight = 1;
    train::RewardFn fn;
};

// One micro-batch's completions, group after group (a prompt's num_generations together).
struct Rollout {
    std::vector<std::int64_t> prompt;                   // per completion: its prompt's index in the file
    std::vector<std::vector<std::int32_t>> completion;  // the tokens generated, a stop token kept
    std::vector<bool> stopped;
    std::vector<double> advantage;
    std::vector<float> old_logps, ref_logps;  // per completion token, completion after completion; empty if unused

    std::int64_t size() const { return static_cast<std::int64_t>(completion.size()); }
    nlohmann::json to_json() const;
    static Rollout from_json(const nlohmann::json& j);
};

// A rollout as the model reads it: rows of prompt then completion (right
// padding after), the completion's tokens as targets, and where they are.
struct RolloutRows {
    Tensor tokens, targets;  // i32 [completions, T]; targets -100 but at the completions' tokens
    Tensor mask;             // f32 [completions, T]: 1 at the tokens the loss counts
    std::vector<std::int64_t> first;  // per completion: the position of its first token's log-probability
};
RolloutRows rollout_rows(const Rollout& r, const std::vector<data::Prompt>& prompts, bool mask_truncated);

// Per-token numbers (completion after completion) laid out as rows' [completions, T] (0 elsewhere), and back.
Tensor spread(const std::vector<float>& per_token, const Rollout& r, const RolloutRows& rows);
std::vector<float> gather(const Tensor& laid_out, const Rollout& r, const RolloutRows& rows);

// Each completion's rewards (one per reward), calling each reward on its
// decoded text; a reward that throws stops the run with levers::Error
// naming the reward and the prompt's line.
std::vector<std::vector<double>> score(const Rollout& r, const std::vector<std::string>& texts,
                                       const std::vector<data::Prompt>& prompts,
                                       const std::vector<WeightedReward>& rewards);

// The step's generation metrics under TRL's names, over every rank
// (collective): reward, reward_std (the groups' mean), frac_reward_zero_std,
// rewards/NAME/mean and /std, completions/mean_length, /min_length,
// /max_length, /clipped_ratio (cut at the budget). `rewards` per completion
// (whole groups of `group`), per reward.
train::Metrics rollout_metrics(const std::vector<std::vector<double>>& rewards, const std::vector<Rollout>& step,
                               const std::vector<WeightedReward>& names, std::int64_t group);

// The weighted sum of each completion's rewards.
std::vector<double> total_rewards(const std::vector<std::vector<double>>& rewards,
                                  const std::vector<WeightedReward>& names);

// A generator per completion, from the run's seed, the generation round, its
// group's place in the round's global batch and its place in the group: what
// a group draws does not depend on the rank generating it.
Rng completion_rng(std::uint64_t seed, std::int64_t round, std::int64_t place, std::int64_t k);

}  // namespace levers::recipes
