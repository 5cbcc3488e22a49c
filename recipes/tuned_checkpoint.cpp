#include "recipes/tuned_checkpoint.hpp"

#include "levers/core/checkpoint.hpp"
#include "levers/core/error.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/nn/lora.hpp"
#include "levers/train/train_state.hpp"
#include "recipes/hf_tuning.hpp"

namespace levers::recipes {

namespace fs = std::filesystem;

TunedCheckpoint read_tuned_checkpoint(const fs::path& file, const fs::path& base) {
    const nlohmann::json meta = read_checkpoint_metadata(file);
    TunedCheckpoint ck{.file = file};
    ck.recipe = meta.value("recipe", "");
    LEVERS_CHECK(ck.recipe == "fine_tune" || ck.recipe == "sft" || ck.recipe == "dpo" || ck.recipe == "grpo",
                 "{}: a checkpoint of recipe '{}'; export reads fine_tune, sft, dpo and grpo checkpoints of Hugging "
                 "Face models", file.string(), ck.recipe);
    try {
        const nlohmann::json& cfg = meta.at("config");
        const std::string model = cfg.value("model", "");
        LEVERS_CHECK(!model.empty(), "{}: a fine_tune checkpoint of a GPT (--set base=), which has no GGUF form "
                     "here; export reads runs of Hugging Face models (--set model=DIR)", file.string());
        ck.base = base.empty() ? fs::path(model) : base;
        ck.lora = {.rank = cfg.at("lora_r").get<int>(), .alpha = cfg.at("lora_alpha").get<double>(),
                   .targets = split_targets(cfg.at("lora_targets").get<std::string>())};
        ck.seed = cfg.at("seed").get<std::uint64_t>();
        ck.step = meta.at("loop").at("step").get<long>();
    } catch (const nlohmann::json::exception& e) {
        LEVERS_FAIL("{}: its run's settings are incomplete ({}); was it written by another levers?", file.string(),
                    e.what());
    }
    LEVERS_CHECK(fs::is_directory(ck.base), "{}: its run read the base model from {}, which is not there from here; "
                 "export where the run ran, or name the base with --set model=DIR", file.string(), ck.base.string());
    models::check_hf_tokenizer(models::check_hf_dir(ck.base), ck.base);
    return ck;
}

void save_tuned_checkpoint(const TunedCheckpoint& ck, const fs::path& dir) {
    auto model = models::load_hf_model(ck.base, Device::cpu(), DType::f32, [&](models::Llama& declared) {
        if (ck.lora.rank > 0) nn::attach_lora(declared, ck.lora.rank, ck.lora.alpha, ck.seed, ck.lora.targets);
    });
    const train::TrainState state = train::read_train_state(ck.file);
    train::load_parameters(state, model->params(), ck.file);
    if (nn::has_lora(*model)) nn::merge_lora(*model);
    models::save_hf_model(dir, *model, {.tokenizer_from = ck.base});
}

}  // namespace levers::recipes
