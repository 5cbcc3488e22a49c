#include "levers/nn/lora.hpp"

#include "levers/nn/sparse_moe.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <set>

namespace levers::nn {

namespace {
void collect(Module& m, std::vector<Linear*>& out) {
    if (auto* linear = dynamic_cast<Linear*>(&m)) out.push_back(linear);
    for (const auto& [name, child] : m.children()) collect(*child, out);
}
}  // namespace

std::vector<Linear*> linear_layers(Module& model) {
    std::vector<Linear*> out;
    collect(model.root(), out);
    return out;
}

namespace {
constexpr const char* kAllLinear = "all-linear";
std::string last_part(const std::string& name) { return name.substr(name.rfind('.') + 1); }
bool chosen_by(const Linear& l, const std::string& target) {
    if (target == kAllLinear) return last_part(l.full_name()) != "lm_head" && !is_router(l);
    return l.full_name() == target || l.full_name().ends_with("." + target);
}
}  // namespace

std::vector<std::string> resolved_targets(Module& model, const std::vector<std::string>& targets) {
    if (std::find(targets.begin(), targets.end(), kAllLinear) == targets.end()) return targets;
    std::set<std::string> names;
    for (const Linear* l : linear_layers(model.root()))
        if (chosen_by(*l, kAllLinear)) names.insert(last_part(l->full_name()));
    for (const auto& t : targets)
        if (t != kAllLinear) names.insert(t);
    return {names.begin(), names.end()};
}

std::vector<Linear*> lora_layers(Module& model, const std::vector<std::string>& targets) {
    Module& root = model.root();
    std::vector<Linear*> chosen;
    for (Linear* l : linear_layers(root))
        for (const auto& t : targets)
            if (chosen_by(*l, t)) {
                chosen.push_back(l);
                break;
            }
    // Each target names some layer: a target of another family's (Phi-3's qkv_proj on a Llama) is a mistake,
    // not a layer to skip quietly.
    for (const auto& t : targets)
        if (std::none_of(chosen.begin(), chosen.end(), [&](const Linear* l) { return chosen_by(*l, t); })) {
            std::set<std::string> names;
            for (const Linear* l : linear_layers(root)) names.insert(last_part(l->full_name()));
            LEVERS_FAIL("LoRA target '{}' names no Linear layer of this model; its layers are {}", t,
                        fmt::join(names, ", "));
        }
    return chosen;
}

int attach_lora(Module& model, int rank, double alpha, std::uint64_t seed, const std::vector<std::string>& targets) {
    Module& root = model.root();
    LEVERS_CHECK(!has_lora(root), "this model already has LoRA adapters");
    const std::vector<Linear*> chosen = lora_layers(root, targets);
    LEVERS_CHECK(alpha > 0, "lora alpha must be positive, got {}", alpha);
    for (Linear* l : chosen)  // every layer checked before any changes
        LEVERS_CHECK(rank >= 1 && rank <= std::min(l->in_features(), l->out_features()),
                     "lora rank must be in 1..{} for '{}' ({} -> {}), got {}",
                     std::min(l->in_features(), l->out_features()), l->full_name(), l->in_features(),
                     l->out_features(), rank);
    root.freeze();
    for (Linear* l : chosen) l->attach_lora(rank, alpha);  // the adapters are trainable
    root.lay_out(seed);
    return static_cast<int>(chosen.size());
}

bool has_lora(Module& model) {
    for (Linear* l : linear_layers(model))
        if (l->has_lora()) return true;
    return false;
}

AdaptersOff::AdaptersOff(Module& model) {
    for (Linear* l : linear_layers(model))
        if (l->has_lora() && l->lora_enabled()) {
            l->enable_lora(false);
            switched_.push_back(l);
        }
}

AdaptersOff::~AdaptersOff() {
    for (Linear* l : switched_) l->enable_lora(true);
}

void merge_lora(Module& model) {
    LEVERS_CHECK(has_lora(model), "merge_lora(): this model has no LoRA adapters");
    for (Linear* l : linear_layers(model))  // 4-bit weights made full precision together: one layout, not one each
        if (l->has_lora() && l->weight.held_in_4bit()) l->weight.dequantize();
    for (Linear* l : linear_layers(model))
        if (l->has_lora()) l->merge_lora();
}

}  // namespace levers::nn
