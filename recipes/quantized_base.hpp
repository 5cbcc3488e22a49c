// QLoRA's base for the recipes that read a Hugging Face model: --set
// quantize=nf4|fp4 (settings::quantize, double_quant) holds its Linear weights
// in 4 bits as they load (levers/nn/quantize.hpp).
#pragma once

#include "levers/distributed/context.hpp"
#include "levers/models/bnb_4bit.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/llama.hpp"
#include "levers/nn/quantize.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/recipe/settings.hpp"

#include <optional>

namespace levers::recipes {

// What --set quantize= asks for, if anything (an unknown type is refused, naming the valid ones).
inline std::optional<ops::Quant4Spec> quant_spec(const Config& cfg) {
    const std::string& type = cfg[settings::quantize];
    if (type.empty()) return std::nullopt;
    return ops::Quant4Spec{.type = ops::quant4_type(type, "--set quantize"), .double_quant = cfg[settings::double_quant]};
}

// The 4-bit form the merged model is saved in, where save_quantized asks for one.
inline std::optional<ops::Quant4Spec> save_quantized_spec(const Config& cfg) {
    if (!cfg[settings::save_quantized]) return std::nullopt;
    return quant_spec(cfg).value_or(ops::Quant4Spec{.double_quant = cfg[settings::double_quant]});
}

// For a recipe's check step: the type known; a model directory `dir` not in 4 bits already; where the recipe
// trains, something left to train.
inline void check_quantize(const Config& cfg, bool trains, const std::filesystem::path& dir) {
    if (!quant_spec(cfg)) return;
    const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
    LEVERS_CHECK(!models::bnb_4bit_config(config, dir / "config.json"), "--set quantize={}: {} is stored in 4 bits "
                 "already (its quantization_config); drop quantize= (its weights are held as stored)",
                 cfg[settings::quantize], dir.string());
    LEVERS_CHECK(!trains || cfg[settings::lora_r] > 0, "--set quantize={} holds the base frozen in 4 bits, and with "
                 "lora_r=0 nothing would train; give adapters (--set lora_r=16), or drop quantize= to fine-tune every "
                 "weight", cfg[settings::quantize]);
}

// Holds `model`'s Linear weights in 4 bits where the config asks (before its weights are read).
inline void hold_in_4bit_if_asked(models::Llama& model, const Config& cfg) {
    if (const auto spec = quant_spec(cfg)) nn::hold_linears_in_4bit(model, *spec);
}

// Says what the 4-bit base holds, where it is one (bytes a weight against bf16's two).
inline void report_4bit(nn::Module& model) {
    const nn::Held4Bit held = nn::held_in_4bit(model);
    if (held.values == 0) return;
    dist::print0("base held in 4 bits: {:.1f} MB for {} weights ({:.2f} bits each, {:.3f}x their bf16 size)\n",
                 static_cast<double>(held.bytes) / 1e6, held.values, 8.0 * static_cast<double>(held.bytes) / static_cast<double>(held.values),
                 static_cast<double>(held.bytes) / (2.0 * static_cast<double>(held.values)));
}

// A Hugging Face model for a recipe that reads it (eval_lm, sample, chat): on this rank's device in the run's
// precision, in 4 bits where the config asks.
inline std::unique_ptr<models::Llama> load_hf_to_read(const std::filesystem::path& dir, const Config& cfg) {
    auto model = models::load_hf_model(dir, dist::device(), cfg.run().compute,
                                       [&](models::Llama& declared) { hold_in_4bit_if_asked(declared, cfg); });
    report_4bit(*model);
    return model;
}

}  // namespace levers::recipes
