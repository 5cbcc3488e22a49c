#include "levers/train/grpo_loss.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/reduce.hpp"

#include <algorithm>
#include <cmath>

namespace levers::train {

GrpoLossType grpo_loss_type(const std::string& name) {
    if (name == "grpo") return GrpoLossType::grpo;
    if (name == "dapo") return GrpoLossType::dapo;
    if (name == "dr_grpo") return GrpoLossType::dr_grpo;
    LEVERS_FAIL("--set loss_type={}: a GRPO loss type is grpo (each completion's token mean), dapo (the batch's "
                "token mean) or dr_grpo (sums over a fixed length)", name);
}

std::vector<double> group_advantages(const std::vector<double>& rewards, std::int64_t group, bool scale) {
    const auto n = static_cast<std::int64_t>(rewards.size());
    LEVERS_CHECK(group >= 1 && n % group == 0, "{} rewards do not make groups of {}", n, group);
    std::vector<double> out(rewards.size());
    for (std::int64_t g = 0; g < n; g += group) {
        const auto at = [&](std::int64_t k) { return rewards[static_cast<std::size_t>(g + k)]; };
        double mean = 0, squares = 0;
        for (std::int64_t k = 0; k < group; ++k) mean += at(k);
        mean /= static_cast<double>(group);
        for (std::int64_t k = 0; k < group; ++k) squares += (at(k) - mean) * (at(k) - mean);
        // A group of one has no spread: torch.std gives nan there; its advantage is 0 either way.
        const double sd = group > 1 ? std::sqrt(squares / static_cast<double>(group - 1)) : 0;
        for (std::int64_t k = 0; k < group; ++k)
            out[static_cast<std::size_t>(g + k)] = scale ? (at(k) - mean) / (sd + 1e-4) : at(k) - mean;
    }
    return out;
}

namespace {
// Σ x·mask / Σ mask on the host (a metric).
double masked_mean(const Tensor& x, const std::vector<double>& mask) {
    const std::vector<double> v = x.values();
    double sum = 0, count = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
        sum += v[i] * mask[i];
        count += mask[i];
    }
    return count > 0 ? sum / count : 0;
}
}  // namespace

GrpoLoss grpo_loss(const Tensor& logps, const Tensor* old, const Tensor* ref, const Tensor& advantages,
                   const Tensor& mask, const GrpoLossOptions& o) {
    LEVERS_CHECK(logps.ndim() == 2 && mask.shape() == logps.shape() && advantages.ndim() == 1 &&
                     advantages.dim(0) == logps.dim(0),
                 "grpo_loss: logps {} and mask {} must be [completions, T], advantages {} [completions]",
                 logps.shape().str(), mask.shape().str(), advantages.shape().str());
    LEVERS_CHECK(o.beta == 0 || ref, "grpo_loss: beta {} > 0 needs the reference's log-probabilities", o.beta);
    const Device device = logps.device();
    const Tensor m = mask.to(device), a = advantages.to(device).unsqueeze(1);
    const Tensor before = old ? old->to(device) : logps.detach();
    const Tensor ratio = ops::exp(logps - before);
    const Tensor clipped = ops::clamp(ratio, 1 - o.epsilon, 1 + o.epsilon_high);
    Tensor per_token = -ops::minimum(ratio * a, clipped * a);
    Tensor kl;
    if (o.beta != 0) {
        const Tensor d = ref->to(device) - logps;
        kl = ops::exp(d) - d - 1;
        per_token = per_token + kl * o.beta;
    }
    const Tensor counted = per_token * m;
    const std::int64_t completions = logps.dim(0);
    const std::vector<double> mask_host = m.values();
    double tokens = 0;
    for (const double v : mask_host) tokens += v;
    Tensor loss;
    switch (o.type) {
        case GrpoLossType::grpo:
            loss = ops::mean(ops::sum(counted, {1}) / ops::clamp_min(ops::sum(m, {1}), 1.0));
            break;
        case GrpoLossType::dapo:
            loss = ops::sum(counted) / std::max(1.0, o.dapo_tokens > 0 ? o.dapo_tokens : tokens);
            break;
        case GrpoLossType::dr_grpo:
            loss = ops::sum(counted) / static_cast<double>(completions * o.max_completion_length);
            break;
    }
    GrpoLoss out{loss, {}};
    // Where clipping took the gradient away: the ratio below 1 - epsilon with a negative advantage, or above
    // 1 + epsilon_high with a positive one.
    const Tensor low = ops::logical_and(ratio < 1 - o.epsilon, a < 0.0).to(DType::f32);
    const Tensor high = ops::logical_and(ratio > 1 + o.epsilon_high, a > 0.0).to(DType::f32);
    const double low_mean = masked_mean(low, mask_host), high_mean = masked_mean(high, mask_host);
    out.metrics = {{"clip_ratio/low_mean", low_mean},
                   {"clip_ratio/high_mean", high_mean},
                   {"clip_ratio/region_mean", low_mean + high_mean}};
    if (o.beta != 0) out.metrics["kl"] = masked_mean(kl, mask_host);
    return out;
}

}  // namespace levers::train
