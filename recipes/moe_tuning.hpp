// What the tuning recipes do for a mixture of experts (mixtral, qwen3_moe):
// the router losses --set router= asks for (aux:COEF, z:COEF), the routers
// trained or frozen (--set train_router=), and each step's routing in the
// metrics: the load-balancing loss, the busiest expert's load against an
// even share, and per layer the share of tokens each expert took.
#pragma once

#include "levers/core/split.hpp"
#include "levers/models/llama.hpp"
#include "levers/recipe/config.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/recipe/settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <variant>

namespace levers::recipes {

// --set router=, read over the model's own defaults; an unknown option or a bad weight is refused naming it.
inline models::Llama::RouterLosses router_losses(const Config& cfg, const models::LlamaConfig& c) {
    models::Llama::RouterLosses out{.aux = c.output_router_logits ? c.router_aux_loss_coef : 0.0};
    const std::string text = cfg[settings::router];
    for (const std::string& item : split(text)) {
        if (item.empty()) continue;
        const auto colon = item.find(':');
        const std::string key = item.substr(0, colon);
        LEVERS_CHECK(key == "aux" || key == "z", "--set router={}: unknown router option '{}'; the options are "
                     "aux:COEF (the load-balancing loss's weight) and z:COEF (the router z-loss's)", text, key);
        double value = -1;  // refused below, naming the item, unless a number >= 0 follows the colon
        if (colon != std::string::npos) {
            try {
                value = std::get<double>(parse_as(0.0, "router", item.substr(colon + 1)));
            } catch (const Error&) {
            }
        }
        LEVERS_CHECK(value >= 0, "--set router={}: '{}' needs a weight >= 0, as {}:0.01", text, item, key);
        (key == "aux" ? out.aux : out.z) = value;
    }
    return out;
}

// For a recipe's check step: router options only for a mixture, and readable.
inline void check_router(const Config& cfg, const models::LlamaConfig& c, const std::string& dir) {
    LEVERS_CHECK(cfg[settings::router].empty() || c.num_experts > 0, "--set router={}: {} is a dense {} model; router "
                 "options go with mixtures of experts (mixtral, qwen3_moe)", cfg[settings::router], dir, c.model_type);
    router_losses(cfg, c);
}

// The router losses on, and the routers learning or frozen, as the config asks (after LoRA's adapters went on,
// which froze the base).
inline void set_up_routers(models::Llama& model, const Config& cfg) {
    model.set_router_losses(router_losses(cfg, model.config()));
    for (models::LlamaLayer& layer : model.model.layers)
        if (layer.moe) layer.moe->gate.weight.set_trainable(cfg[settings::train_router]);
}

// The last forward's routing as step metrics (none for a dense model): aux_loss, max_expert_load (the busiest
// expert's tokens over an even share, the largest over the layers) and experts/<layer>/<expert>, the share of a
// layer's routed tokens each expert took.
inline Metrics router_metrics(models::LanguageModel& model) {
    auto* llama = dynamic_cast<models::Llama*>(&model);
    if (!llama || llama->tokens_per_expert().empty()) return {};
    Metrics out{{"aux_loss", llama->aux_loss().item()}};
    double busiest = 0;
    const auto& layers = llama->tokens_per_expert();
    std::size_t sparse = 0;
    for (std::size_t l = 0; l < llama->model.layers.size(); ++l) {
        if (!llama->model.layers[l].moe) continue;
        const auto& counts = layers[sparse++];
        std::int64_t total = 0;
        for (std::int64_t c : counts) total += c;
        if (total == 0) continue;
        for (std::size_t e = 0; e < counts.size(); ++e) {
            const double share = static_cast<double>(counts[e]) / static_cast<double>(total);
            out[fmt::format("experts/{}/{}", l, e)] = share;
            busiest = std::max(busiest, share * static_cast<double>(counts.size()));
        }
    }
    out["max_expert_load"] = busiest;
    return out;
}

}  // namespace levers::recipes
