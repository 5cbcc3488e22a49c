// GRPO's objective (DeepSeekMath) over a batch of sampled completions, as
// TRL defines it. Per completion token t of completion i, with
// ratio c = exp(logp - old_logp):
//
//   l_t = -min(c A_i, clip(c, 1 - epsilon, 1 + epsilon_high) A_i)
//         + beta (exp(ref - logp) - (ref - logp) - 1)        (k3's KL; only where beta > 0)
//
// A_i the completion's advantage within its group (group_advantages). The
// tokens are averaged as loss_type says:
//   grpo:    each completion's mean over its tokens, then the mean over completions;
//   dapo:    the sum over every token / the batch's token count (a step's, over every rank);
//   dr_grpo: the sum over every token / (completions x max_completion_length).
// With one update per generated batch the old log-probabilities are the
// policy's own, detached (c = 1, the gradient A ∇logp).
#pragma once

#include "levers/core/tensor.hpp"
#include "levers/train/early_stopping.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace levers::train {

enum class GrpoLossType { grpo, dapo, dr_grpo };
// "grpo", "dapo" or "dr_grpo"; throws levers::Error naming the valid ones.
GrpoLossType grpo_loss_type(const std::string& name);

// Each completion's advantage: its reward less its group's mean (groups of
// `group` consecutive completions), divided by the group's standard
// deviation (Bessel's, as torch.std) + 1e-4 where `scale`.
std::vector<double> group_advantages(const std::vector<double>& rewards, std::int64_t group, bool scale);

struct GrpoLossOptions {
    GrpoLossType type = GrpoLossType::dapo;
    double epsilon = 0.2, epsilon_high = 0.2;
    double beta = 0;
    std::int64_t max_completion_length = 256;  // dr_grpo's constant
    // dapo: the tokens one micro-batch stands for (the step's counted tokens
    // over every rank and micro-batch / their number), so that the mean over
    // micro-batches and ranks is the sum over all tokens / all tokens; 0:
    // this batch's own count.
    double dapo_tokens = 0;
};

struct GrpoLoss {
    Tensor loss;      // one element, differentiable through logps
    Metrics metrics;  // TRL's names: kl (where beta > 0), clip_ratio/low_mean, clip_ratio/high_mean,
                      // clip_ratio/region_mean (token means)
};

// logps, old and ref: f32 [completions, T], each token's log-probability at
// its position (old: the policy's when the completions were generated, null
// for logps detached; ref: the reference's, needed where beta > 0); mask:
// f32 [completions, T], 1 at the tokens that count; advantages [completions].
GrpoLoss grpo_loss(const Tensor& logps, const Tensor* old, const Tensor* ref, const Tensor& advantages,
                   const Tensor& mask, const GrpoLossOptions& options);

}  // namespace levers::train
