// What fine_tune and sft share for Hugging Face models: the LoRA settings
// from the parameters (lora_r, lora_alpha, lora_targets, seed), adapters
// attached to the loaded model, and the result saved into the run
// directory as the PEFT adapter (adapter/) and the merged model (model/).
#pragma once

#include "levers/distributed/context.hpp"
#include "levers/nn/lora.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"

#include <sstream>

namespace levers::recipes {

// lora_r, lora_alpha and lora_targets, declared (in the middle of a recipe's chain).
template <class Spec> decltype(auto) lora_params(Spec&& spec) {
    return std::forward<Spec>(spec).param("lora_r", 8, "adapter rank (0: fine-tune every weight)", at_least(0))
        .param("lora_alpha", 16.0, "adapter scale numerator: updates are scaled by lora_alpha / lora_r", at_least(0))
        .param("lora_targets", "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj",
               "the layers a HF model's adapters go on (names or their last parts, comma-separated)");
}

inline std::vector<std::string> lora_targets(const Config& cfg) {
    std::vector<std::string> out;
    std::stringstream list(cfg.get<std::string>("lora_targets"));
    for (std::string t; std::getline(list, t, ',');)
        if (!t.empty()) out.push_back(t);
    return out;
}

inline models::LoraSettings lora_settings(const Config& cfg) {
    return {.rank = static_cast<int>(cfg.get<long>("lora_r")), .alpha = cfg.get<double>("lora_alpha"),
            .targets = lora_targets(cfg)};
}

// For a recipe's check step.
inline void check_lora(const Config& cfg) {
    LEVERS_CHECK(cfg.get<long>("lora_r") == 0 || !lora_targets(cfg).empty(),
                 "--set lora_targets= names no layer; give e.g. q_proj,k_proj,v_proj,o_proj");
}

// With lora_r > 0, adapters on `targets` (then only they train); says what trains.
inline void attach_adapters(models::LanguageModel& model, const Config& cfg, const std::vector<std::string>& targets,
                            const std::string& from) {
    const long r = cfg.get<long>("lora_r");
    LEVERS_CHECK(r >= 0, "lora_r must be >= 0 (0: full fine-tuning), got {}", r);
    const std::int64_t all = model.params().size();
    if (r > 0)
        nn::attach_lora(model, static_cast<int>(r), cfg.get<double>("lora_alpha"),
                        static_cast<std::uint64_t>(cfg.get<long>("seed")), targets);
    dist::print0("base {}: {}; training {} of its {} parameters ({})\n", from, model.summary(), model.params().size(),
                 all, r > 0 ? fmt::format("LoRA rank {}", r) : std::string("every weight"));
}

// The PEFT adapter (when there are adapters) and the merged model, into the run directory (rank 0 writes;
// none without one).
inline Result save_hf_tuned(models::LanguageModel& model, const std::filesystem::path& base_dir,
                            const models::LoraSettings& lora, const std::filesystem::path& run_dir) {
    Result out = {{"trainable_parameters", model.params().size()}};
    const bool adapters = nn::has_lora(model);
    if (dist::is_main() && !run_dir.empty() && adapters) {
        models::save_peft_adapter(run_dir / "adapter", model, lora, base_dir.string());
        out["adapter"] = (run_dir / "adapter").string();
    }
    if (adapters) nn::merge_lora(model);
    if (dist::is_main() && !run_dir.empty()) {
        models::save_hf_model(run_dir / "model", dynamic_cast<models::Llama&>(model), {.tokenizer_from = base_dir});
        out["model"] = (run_dir / "model").string();
    }
    return out;
}

}  // namespace levers::recipes
