// The losses of preference tuning, over each answer's log-probability under
// the policy and (but for SimPO) a frozen reference, as TRL defines them:
//
//   sigmoid (DPO):  z = (π_c - π_r) - (ref_c - ref_r)
//                   loss = -(1-ε) log σ(βz) - ε log σ(-βz)   (ε: label_smoothing, conservative DPO)
//   ipo:            the same z over per-token means; loss = (z - 1/(2β))²
//   simpo:          no reference; z = mean π_c - mean π_r - γ/β; loss as sigmoid's
//
// each the mean over the batch's pairs. π_c is the sum over the chosen
// answer's tokens of log π(token | what precedes) (the prompt's never count).
#pragma once

#include "levers/core/tensor.hpp"
#include "levers/data/preference_data.hpp"
#include "levers/train/early_stopping.hpp"

#include <string>

namespace levers::train {

enum class PreferenceLossType { sigmoid, ipo, simpo };
// "sigmoid", "ipo" or "simpo"; throws levers::Error naming the valid ones.
PreferenceLossType preference_loss_type(const std::string& name);

struct PreferenceLossOptions {
    PreferenceLossType type = PreferenceLossType::sigmoid;
    double beta = 0.1;
    double label_smoothing = 0;
    double gamma = 0.5;  // SimPO's target margin
};

// Each pair's summed log-probabilities ([pairs], f32) and answer lengths (tokens counted).
struct PairLogps {
    Tensor chosen, rejected;
    Tensor chosen_tokens, rejected_tokens;
};

// Sums token_logps ([rows, context]: Llama::token_logprobs) over each answer of the batch's pairs.
PairLogps pair_logps(const Tensor& token_logps, const data::PreferenceBatch& batch);

struct PreferenceLoss {
    Tensor loss;      // one element, differentiable through the policy's log-probabilities
    Metrics metrics;  // TRL's names: rewards/chosen, rewards/rejected, rewards/accuracies, rewards/margins,
                      // logps/chosen, logps/rejected (batch means)
};
// `reference` is ignored for simpo and required otherwise.
PreferenceLoss preference_loss(const PairLogps& policy, const PairLogps* reference, const PreferenceLossOptions& options);

}  // namespace levers::train
