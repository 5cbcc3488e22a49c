#include "levers/train/preference_loss.hpp"

#include "levers/core/error.hpp"
#include "levers/kernels/elementwise.hpp"
#include "levers/kernels/indexing.hpp"
#include "levers/kernels/reduce.hpp"

namespace levers::train {

PreferenceLossType preference_loss_type(const std::string& name) {
    if (name == "sigmoid") return PreferenceLossType::sigmoid;
    if (name == "ipo") return PreferenceLossType::ipo;
    if (name == "simpo") return PreferenceLossType::simpo;
    LEVERS_FAIL("--set loss={}: a preference loss is sigmoid (DPO), ipo or simpo", name);
}

PairLogps pair_logps(const Tensor& token_logps, const data::PreferenceBatch& batch) {
    const std::int64_t rows = batch.rows.tokens.dim(0), slots = rows * batch.slots;
    const Device device = token_logps.device();
    const Tensor slot = batch.slot.to(device);
    const Tensor sums = ops::scatter_add(Tensor::zeros({slots}, DType::f32, device), 0, slot,
                                         token_logps.reshape({token_logps.numel()}));
    // Tokens counted per slot, on the host (the targets are there).
    std::vector<float> counted(static_cast<std::size_t>(slots), 0.0f);
    const Tensor targets = batch.rows.targets.contiguous();
    const Tensor host_slot = batch.slot.contiguous();
    for (std::int64_t i = 0; i < targets.numel(); ++i)
        if (targets.data<std::int32_t>()[i] != data::kIgnoredTarget)
            counted[static_cast<std::size_t>(host_slot.data<std::int32_t>()[i])] += 1;
    const auto pairs = static_cast<std::int64_t>(batch.pair.size());
    const auto pick = [&](const std::vector<std::int32_t>& which) {
        return ops::index_select(sums, 0, Tensor::from(which, {pairs}).to(device));
    };
    const auto lengths = [&](const std::vector<std::int32_t>& which) {
        std::vector<float> n;
        for (const std::int32_t s : which) n.push_back(counted[static_cast<std::size_t>(s)]);
        return Tensor::from(n, {pairs}).to(device);
    };
    return {pick(batch.chosen_slot), pick(batch.rejected_slot), lengths(batch.chosen_slot),
            lengths(batch.rejected_slot)};
}

namespace {
Tensor log_sigmoid(const Tensor& x) { return -ops::softplus(-x); }
double mean_of(const Tensor& x) {
    const std::vector<double> v = x.values();
    double s = 0;
    for (const double e : v) s += e;
    return v.empty() ? 0 : s / static_cast<double>(v.size());
}
}  // namespace

PreferenceLoss preference_loss(const PairLogps& policy, const PairLogps* reference, const PreferenceLossOptions& o) {
    const bool simpo = o.type == PreferenceLossType::simpo;
    LEVERS_CHECK(simpo || reference, "a preference loss of type sigmoid or ipo needs the reference's log-probabilities");
    LEVERS_CHECK(o.beta > 0, "--set beta={} must be positive", o.beta);
    // IPO and SimPO compare per-token means; DPO sums.
    const bool per_token = o.type != PreferenceLossType::sigmoid;
    const auto scaled = [&](const PairLogps& p, bool chosen) {
        const Tensor& v = chosen ? p.chosen : p.rejected;
        return per_token ? v / (chosen ? p.chosen_tokens : p.rejected_tokens) : v;
    };
    const Tensor pc = scaled(policy, true), pr = scaled(policy, false);
    Tensor z, chosen_reward, rejected_reward;
    if (simpo) {
        z = pc - pr - o.gamma / o.beta;
        chosen_reward = pc * o.beta;
        rejected_reward = pr * o.beta;
    } else {
        const Tensor rc = scaled(*reference, true), rr = scaled(*reference, false);
        z = (pc - pr) - (rc - rr);
        chosen_reward = (pc - rc) * o.beta;
        rejected_reward = (pr - rr) * o.beta;
    }
    Tensor per_pair;
    if (o.type == PreferenceLossType::ipo) {
        per_pair = ops::square(z - 1 / (2 * o.beta));
    } else {
        const Tensor bz = z * o.beta;
        per_pair = log_sigmoid(bz) * -(1 - o.label_smoothing) - log_sigmoid(-bz) * o.label_smoothing;
    }
    PreferenceLoss out{ops::mean(per_pair), {}};
    const std::vector<double> c = chosen_reward.values(), r = rejected_reward.values();
    double wins = 0;
    for (std::size_t k = 0; k < c.size(); ++k) wins += c[k] > r[k] ? 1 : 0;
    out.metrics = {{"rewards/chosen", mean_of(chosen_reward)},
                   {"rewards/rejected", mean_of(rejected_reward)},
                   {"rewards/accuracies", c.empty() ? 0 : wins / static_cast<double>(c.size())},
                   {"rewards/margins", mean_of(chosen_reward) - mean_of(rejected_reward)},
                   {"logps/chosen", mean_of(pc)},
                   {"logps/rejected", mean_of(pr)}};
    return out;
}

}  // namespace levers::train
