// fine_tune: a pretrained language model adapts to a second text with LoRA
// adapters (or every weight, with lora_r=0). The model is a Hugging Face
// directory of the Llama family (--set model=DIR: adapters on the attention
// and MLP projections by default, the text read with the model's own
// tokenizer) or a GPT (--set base=: a pretrain run's, or GPT-2 weights in
// safetensors with their BPE tokenizer; adapters on the attention
// projections). The framework owns the loop, so `recipe run fine_tune --gpus
// 8` needs no change here. The adapted model, adapters merged, goes to the
// run directory: a HF directory (model/) and the PEFT adapter (adapter/), or
// model.ckpt and model.safetensors for a GPT.
#include "levers/data/files.hpp"
#include "levers/distributed/context.hpp"
#include "levers/models/gpt2_weights.hpp"
#include "levers/models/gpt_files.hpp"
#include "levers/models/gpt_io.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/nn/lora.hpp"
#include "levers/recipe/recipe.hpp"
#include "recipes/hf_tuning.hpp"
#include "recipes/text_windows.hpp"

#include <filesystem>

namespace levers_recipe_fine_tune {

namespace {

using namespace levers;
namespace fs = std::filesystem;

using Model = models::LanguageModel;

const Param<std::string> model_dir{"model", "", "a Hugging Face model directory (Llama, Mistral, Qwen, SmolLM3, "
                                   "Gemma, Phi, Mixtral, Qwen3-MoE), instead of --set base="};
const Param<std::string> base{"base", "runs/pretrain/latest/model.ckpt",
                              "the pretrained GPT: a pretrain run's model.ckpt, or GPT-2 weights (.safetensors)"};
const Param<std::string> corpus{"corpus", "", "the text to adapt to: a .txt file or directory (default: Newton's "
                                "Opticks)"};
const Param<long> context{"context", 512, "a HF model's window length in tokens (at most its "
                          "max_position_embeddings)", at_least(2)};

// The text in windows of the model's context (a GPT's is known once it is
// built), and what saving a HF model needs.
struct Text : recipes::TextWindows {
    std::string model_dir;      // a HF model's directory (its tokenizer files go with the saved model)
    models::LoraSettings lora;  // the adapters' settings, for the PEFT adapter saved
};

bool hf(const Config& cfg) { return !cfg[model_dir].empty(); }

// GPT-2 weights (.safetensors) read GPT-2's BPE tokens; levers' byte-level models, bytes.
int gpt_vocabulary(const Config& cfg) {
    return models::weights_format(cfg[base], "--set base=") == models::WeightsFormat::safetensors ? 50257 : 256;
}

void check(const Config& cfg) {
    if (hf(cfg)) {
        const fs::path dir = cfg[model_dir];
        models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
        recipes::check_lora(cfg, dir);
        recipes::check_gguf(cfg, dir);
        return;
    }
    LEVERS_CHECK(cfg[recipes::gguf].empty(), "--set gguf={} goes with --set model=DIR (a Hugging Face model); a "
                 "GPT has no GGUF form here", cfg[recipes::gguf]);
    LEVERS_CHECK(cfg[settings::quantize].empty(), "--set quantize={} goes with --set model=DIR (a Hugging Face "
                 "model); a GPT base is fine-tuned in full precision", cfg[settings::quantize]);
    const fs::path from = cfg[base];
    LEVERS_CHECK(fs::exists(from), "fine_tune: base checkpoint {} not found; run `recipe run pretrain` first, or give "
                 "one with --set base=PATH (or a Hugging Face directory with --set model=DIR)", from.string());
    gpt_vocabulary(cfg);  // the format, named if it is neither
}

// The pretrained model; with lora_r > 0 only its adapters are trainable (params()).
std::unique_ptr<Model> load_base(const Config& cfg) {
    if (hf(cfg)) return recipes::load_hf_for_tuning(cfg, cfg[model_dir]);
    const std::string from = cfg[base];
    auto gpt = models::load_any_gpt(from, cfg[recipes::n_head]);
    LEVERS_CHECK(gpt->config().vocab_size == gpt_vocabulary(cfg), "fine_tune: {} has a vocabulary of {}; levers "
                 "reads GPT-2's BPE (50257) from .safetensors files and bytes (256) from model.ckpt files",
                 from, gpt->config().vocab_size);
    std::unique_ptr<Model> model = std::move(gpt);
    recipes::attach_adapters(*model, cfg, {"attn.c_attn", "attn.c_proj"}, from);
    model->checkpoint_blocks(cfg[settings::checkpointing]);
    return model;
}

std::unique_ptr<Text> load_text(const Config& cfg) {
    const std::string path = cfg[corpus];
    models::TextCodec codec;
    std::int64_t window = 0;  // a GPT's block, known once the model is
    if (hf(cfg)) {
        const fs::path dir = cfg[model_dir];
        const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
        codec = models::hf_codec(dir, config.vocab_size);
        window = std::min<std::int64_t>(cfg[context], config.max_position_embeddings);
    } else {
        codec = models::codec_for_vocab(gpt_vocabulary(cfg), cfg[base]);
    }
    auto text = std::make_unique<Text>();
    recipes::init_text_windows(
        *text,
        data::load_text_corpus(path.empty() ? data::data_dir() / "books" / "Isaac.Newton-Opticks.txt" : fs::path(path),
                               0.1, codec.encode, codec.name),
        cfg, window);
    text->model_dir = cfg[model_dir];
    text->lora = recipes::lora_settings(cfg);
    return text;
}

Result save(Model& model, Text& d, const LoopResult& run, const Config& cfg) {
    const fs::path& run_dir = cfg.run().dir;
    if (!d.model_dir.empty())
        return recipes::save_hf_tuned(model, d.model_dir, d.lora, run_dir, cfg[recipes::gguf],
                                      recipes::save_quantized_spec(cfg));
    Result out = {{"trainable_parameters", model.params().size()}};
    const bool lora = nn::has_lora(model);
    auto& gpt = dynamic_cast<models::Gpt&>(model);
    if (lora) nn::merge_lora(model);
    if (dist::is_main() && !run_dir.empty()) {
        models::save_gpt(run_dir / "model.ckpt", gpt, {{"recipe", "fine_tune"}, {"steps", run.steps}});
        models::save_gpt2_safetensors(run_dir / "model.safetensors", gpt);
        out["model"] = (run_dir / "model.ckpt").string();
    }
    return out;
}

}  // namespace

LEVERS_RECIPE(fine_tune) {
    return levers::recipe("fine_tune")
        .describe("adapts a pretrained language model (a HF directory or a GPT) to another text with LoRA or every "
                  "weight; reports validation loss before and after")
        .training({.steps = 300, .lr = 2e-3, .warmup = 20, .log_every = 25, .checkpoint_every = 100,
                   .batch_size = 16, .seed = 1337, .eval_every = 100})
        .lora({})
        .activation_checkpointing()
        .params(model_dir, base, recipes::n_head, corpus, context, recipes::eval_batches, recipes::gguf)
        .check(check)
        .model(load_base)
        .data(load_text)
        .step(recipes::window_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) { o.unit = "tok"; })
        .evaluate(recipes::window_validation)
        .evaluate_at_start()
        .finish(save);
}

}  // namespace levers_recipe_fine_tune
