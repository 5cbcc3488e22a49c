// What fine_tune and sft share for Hugging Face models: the LoRA settings
// from the parameters .lora declares (settings::lora_r, lora_alpha,
// lora_targets; the adapters seeded by settings::seed), the model loaded
// with adapters attached, and the result saved into the run directory as
// the PEFT adapter (adapter/) and the merged model (model/).
#pragma once

#include "levers/core/rng.hpp"
#include "levers/core/split.hpp"
#include "levers/data/chat_template.hpp"
#include "levers/distributed/context.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "levers/nn/lora.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/gguf_params.hpp"
#include "recipes/moe_tuning.hpp"
#include "recipes/quantized_base.hpp"

#include <filesystem>
#include <memory>
#include <optional>

namespace levers::recipes {

// "q_proj,v_proj" as its names (empty items left out).
inline std::vector<std::string> split_targets(const std::string& text) {
    std::vector<std::string> out;
    for (std::string& t : split(text))
        if (!t.empty()) out.push_back(std::move(t));
    return out;
}

inline std::vector<std::string> lora_targets(const Config& cfg) { return split_targets(cfg[settings::lora_targets]); }

inline models::LoraSettings lora_settings(const Config& cfg) {
    return {.rank = cfg[settings::lora_r], .alpha = cfg[settings::lora_alpha], .targets = lora_targets(cfg)};
}

// For a recipe's check step (QLoRA's and the routers' settings too, against the model directory `dir`): each
// target names a layer of this model (asked of the model declared, nothing allocated).
inline void check_lora(const Config& cfg, const std::filesystem::path& dir) {
    LEVERS_CHECK(cfg[settings::lora_r] == 0 || !lora_targets(cfg).empty(),
                 "--set lora_targets= names no layer; give e.g. q_proj,k_proj,v_proj,o_proj");
    const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
    if (cfg[settings::lora_r] > 0) {
        models::Llama declared(config);
        try {
            nn::lora_layers(declared, lora_targets(cfg));
        } catch (const Error& e) {
            LEVERS_FAIL("--set lora_targets={}: {} ({})", cfg[settings::lora_targets], e.message(), config.model_type);
        }
    }
    check_router(cfg, config, dir.string());
    check_quantize(cfg, true, dir);
    LEVERS_CHECK(!cfg[settings::save_quantized] || cfg[gguf].empty(), "--set save_quantized=true saves the merged "
                 "model in 4 bits, and --set gguf={} exports it from full precision; drop one", cfg[gguf]);
}

// With lora_r > 0, adapters on `targets` (then only they train, with a mixture's routers where train_router);
// says what trains.
inline void attach_adapters(models::LanguageModel& model, const Config& cfg, const std::vector<std::string>& targets,
                            const std::string& from) {
    const int r = cfg[settings::lora_r];
    const std::int64_t all = model.params().size();
    if (r > 0) nn::attach_lora(model, r, cfg[settings::lora_alpha], cfg[settings::seed], targets);
    if (auto* llama = dynamic_cast<models::Llama*>(&model)) set_up_routers(*llama, cfg);
    dist::print0("base {}: {}; training {} of its {} parameters ({})\n", from, model.summary(), model.params().size(),
                 all, r > 0 ? fmt::format("LoRA rank {}", r) : std::string("every weight"));
}

// A Hugging Face model on this rank's device in the run's precision, adapters
// on lora_targets (attached before the weights are read: the frozen base goes
// to a GPU in bf16 alone in a bf16 run, or in 4 bits with quantize=), its
// blocks checkpointed where asked.
inline std::unique_ptr<models::LanguageModel> load_hf_for_tuning(const Config& cfg, const std::string& dir) {
    auto model = models::load_hf_model(dir, dist::device(), cfg.run().compute, [&](models::Llama& declared) {
        hold_in_4bit_if_asked(declared, cfg);  // first: nothing laid out yet, nothing quantized twice
        attach_adapters(declared, cfg, lora_targets(cfg), dir);
    });
    report_4bit(*model);
    model->checkpoint_blocks(cfg[settings::checkpointing]);
    return model;
}

// The PEFT adapter (when there are adapters) and the merged model, into the run directory (rank 0 writes;
// none without one; in 4 bits as bitsandbytes saves them with `save_quantized`), and the merged model as GGUF of
// `gguf_type` beside it where one is asked for.
inline Result save_hf_tuned(models::LanguageModel& model, const std::filesystem::path& base_dir,
                            const models::LoraSettings& lora, const std::filesystem::path& run_dir,
                            const std::string& gguf_type = "",
                            const std::optional<ops::Quant4Spec>& save_quantized = std::nullopt) {
    Result out = {{"trainable_parameters", model.params().size()}};
    const bool adapters = nn::has_lora(model);
    if (dist::is_main() && !run_dir.empty() && adapters) {
        models::save_peft_adapter(run_dir / "adapter", model, lora, base_dir.string());
        out["adapter"] = (run_dir / "adapter").string();
    }
    if (adapters) nn::merge_lora(model);
    if (dist::is_main() && !run_dir.empty()) {
        models::save_hf_model(run_dir / "model", dynamic_cast<models::Llama&>(model),
                              {.tokenizer_from = base_dir, .quantize = save_quantized});
        out["model"] = (run_dir / "model").string();
        if (!gguf_type.empty()) {  // the run's own file: a resumed run writes it again
            const auto gguf_file = run_dir / ("model-" + gguf_type + ".gguf");
            out["gguf"] = write_gguf(run_dir / "model", gguf_file, gguf_type, true).file.string();
        }
    }
    return out;
}

// The chat template of a model directory's tokenizer, or none where it has none
// (a template it cannot read is an error).
inline std::optional<data::ChatTemplate> chat_template_of(const std::filesystem::path& dir) {
    namespace fs = std::filesystem;
    if (!fs::exists(dir / "chat_template.jinja") && !fs::exists(dir / "tokenizer_config.json")) return std::nullopt;
    try {
        return data::ChatTemplate::from_dir(dir);
    } catch (const Error& e) {
        if (e.message().find("has no chat template") == std::string::npos) throw;
        return std::nullopt;
    }
}

// `items` split into (training, held out): `fraction` of them (at least one
// when above 0) drawn with `seed`, the same draw on every rank. Throws
// levers::Error when nothing would be left to train on.
template <class T>
std::pair<std::vector<T>, std::vector<T>> split_held_out(const std::vector<T>& items, double fraction,
                                                         std::uint64_t seed, const char* what) {
    const std::size_t n = items.size();
    const std::size_t held = fraction > 0 ? std::max<std::size_t>(1, static_cast<std::size_t>(fraction * n + 0.5)) : 0;
    LEVERS_CHECK(held < n, "{} {} cannot spare {} for validation; add more or --set val_fraction=0", n, what, held);
    std::vector<std::size_t> order(n);
    for (std::size_t i = 0; i < n; ++i) order[i] = i;
    Rng rng(seed);
    for (std::size_t i = n - 1; i > 0; --i) std::swap(order[i], order[rng.below(i + 1)]);
    std::pair<std::vector<T>, std::vector<T>> out;
    for (std::size_t i = 0; i < n; ++i) (i < held ? out.second : out.first).push_back(items[order[i]]);
    return out;
}

}  // namespace levers::recipes
