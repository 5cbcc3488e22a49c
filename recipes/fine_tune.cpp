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
#include "levers/data/text_corpus.hpp"
#include "levers/data/token_windows.hpp"
#include "levers/distributed/context.hpp"
#include "levers/nn/lora.hpp"
#include "levers/recipe/recipe.hpp"
#include "levers/train/window_loss.hpp"
#include "levers/models/gpt2_weights.hpp"
#include "levers/models/gpt_files.hpp"
#include "levers/models/gpt_io.hpp"
#include "levers/models/hf_dir.hpp"
#include "levers/models/peft_adapter.hpp"
#include "recipes/hf_tuning.hpp"

#include <filesystem>
#include <optional>

namespace {

using namespace levers;
namespace fs = std::filesystem;

using Model = models::LanguageModel;

// The text, and where training is in it: windows of the model's context,
// made at the first step (the data is built without the model).
struct Text {
    data::TextCorpus corpus;
    std::int64_t batch = 0, context = 0;
    std::uint64_t seed = 0;
    long eval_batches = 0;
    std::string model_dir;     // a HF model's directory (its tokenizer files go with the saved model)
    models::LoraSettings lora;  // the adapters' settings, for the PEFT adapter saved
    std::optional<data::TokenWindows> windows;
    nlohmann::json resumed;  // a saved position, for the windows when they are made

    data::TokenWindows& windows_of() {
        if (!windows) {
            windows.emplace(corpus.train, batch, context, seed, dist::world_size(), dist::rank());
            if (!resumed.is_null()) windows->load_state(resumed);
        }
        return *windows;
    }
    nlohmann::json save_state() const { return windows ? windows->save_state() : resumed; }
    void load_state(const nlohmann::json& j) {
        resumed = j;
        if (windows) windows->load_state(j);
    }
};

bool hf(const Config& cfg) { return !cfg.get<std::string>("model").empty(); }

// GPT-2 weights (.safetensors) read GPT-2's BPE tokens; levers' byte-level models, bytes.
int gpt_vocabulary(const Config& cfg) {
    return models::weights_format(cfg.get<std::string>("base"), "--set base=") == models::WeightsFormat::safetensors
               ? 50257
               : 256;
}

void check(const Config& cfg) {
    if (hf(cfg)) {
        const fs::path dir = cfg.get<std::string>("model");
        models::check_hf_tokenizer(models::check_hf_dir(dir), dir);
        recipes::check_lora(cfg);
        return;
    }
    const fs::path base = cfg.get<std::string>("base");
    LEVERS_CHECK(fs::exists(base), "fine_tune: base checkpoint {} not found; run `recipe run pretrain` first, or give "
                 "one with --set base=PATH (or a Hugging Face directory with --set model=DIR)", base.string());
    gpt_vocabulary(cfg);  // the format, named if it is neither
}

// The pretrained model; with lora_r > 0 only its adapters are trainable (params()).
std::unique_ptr<Model> load_base(const Config& cfg) {
    std::unique_ptr<Model> model;
    std::string from;
    if (hf(cfg)) {
        from = cfg.get<std::string>("model");
        model = models::load_hf_model(from, dist::device(), cfg.run().compute);
    } else {
        from = cfg.get<std::string>("base");
        auto gpt = models::load_any_gpt(from, cfg.get<int>("n_head"));
        LEVERS_CHECK(gpt->config().vocab_size == gpt_vocabulary(cfg), "fine_tune: {} has a vocabulary of {}; levers "
                     "reads GPT-2's BPE (50257) from .safetensors files and bytes (256) from model.ckpt files",
                     from, gpt->config().vocab_size);
        model = std::move(gpt);
    }
    recipes::attach_adapters(*model, cfg,
                             hf(cfg) ? recipes::lora_targets(cfg) : std::vector<std::string>{"attn.c_attn", "attn.c_proj"},
                             from);
    model->checkpoint_blocks(cfg.get<bool>("checkpointing"));
    return model;
}

std::unique_ptr<Text> load_text(const Config& cfg) {
    const std::string path = cfg.get<std::string>("corpus");
    models::TextCodec codec;
    std::int64_t context = 0;
    if (hf(cfg)) {
        const fs::path dir = cfg.get<std::string>("model");
        const models::LlamaConfig config = models::read_llama_config(dir / "config.json");
        codec = models::hf_codec(dir, config.vocab_size);
        context = std::min<std::int64_t>(cfg.get<long>("context"), config.max_position_embeddings);
    } else {
        codec = models::codec_for_vocab(gpt_vocabulary(cfg), cfg.get<std::string>("base"));
    }
    auto text = std::make_unique<Text>();
    text->corpus = data::load_text_corpus(
        path.empty() ? data::data_dir() / "books" / "Isaac.Newton-Opticks.txt" : fs::path(path), 0.1, codec.encode,
        codec.name);
    text->batch = dist::per_rank_batch(cfg.get<long>("batch_size"), 0);
    text->context = context;  // 0 for a GPT: its block, known once the model is
    text->seed = static_cast<std::uint64_t>(cfg.get<long>("seed")) + 1;
    text->eval_batches = cfg.get<long>("eval_batches");
    text->model_dir = cfg.get<std::string>("model");
    text->lora = recipes::lora_settings(cfg);
    dist::print0("corpus {:.2f} MB train, {:.2f} MB validation; batch {} per rank\n", text->corpus.train.size() / 1e6,
                 text->corpus.validation.size() / 1e6, text->batch);
    return text;
}

MicroResult train_step(Model& model, Text& d, const StepInfo&) {
    if (d.context == 0) d.context = model.context_length();
    const data::TokenBatch b = d.windows_of().next();
    const Tensor loss = model.loss(b.inputs, b.targets);
    loss.backward();
    return {loss.item(), static_cast<long>(b.batch * b.time)};
}

Metrics validate(Model& model, Text& d) {
    if (d.context == 0) d.context = model.context_length();
    return {{"val_loss", train::mean_window_loss(model, d.corpus.validation, d.batch, d.context, d.eval_batches)}};
}

Result save(Model& model, Text& d, const LoopResult& run, const Config& cfg) {
    const std::filesystem::path& run_dir = cfg.run().dir;
    if (!d.model_dir.empty()) return recipes::save_hf_tuned(model, d.model_dir, d.lora, run_dir);
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
    return recipes::lora_params(levers::recipe("fine_tune")
        .describe("adapts a pretrained language model (a HF directory or a GPT) to another text with LoRA or every "
                  "weight; reports validation loss before and after")
        .training({.steps = 300, .lr = 2e-3, .warmup = 20, .log_every = 25})
        .activation_checkpointing()
        .param("model", "", "a Hugging Face model directory (Llama, Mistral, Qwen), instead of --set base=")
        .param("base", "runs/pretrain/latest/model.ckpt",
               "the pretrained GPT: a pretrain run's model.ckpt, or GPT-2 weights (.safetensors)")
        .param("n_head", 0, "attention heads of safetensors weights (0: from their metadata or config.json)", at_least(0))
        .param("corpus", "", "the text to adapt to: a .txt file or directory (default: Newton's Opticks)"))
        .param("context", 512, "a HF model's window length in tokens (at most its max_position_embeddings)", at_least(2))
        .param("batch_size", 16, "sequences per step and rank", at_least(1))
        .param("seed", 1337, "adapter initialisation and data-order seed")
        .param("eval_every", 100, "steps between validation passes", at_least(0))
        .param("eval_batches", 16, "batches per validation pass", at_least(1))
        .param("checkpoint_every", 100, "steps between training checkpoints in the run directory (0: none)", at_least(0))
        .check(check)
        .micro_batch("batch_size")
        .model(load_base)
        .data(load_text)
        .step(train_step)
        .adjust_loop([](const Config&, train::LoopOptions& o) { o.unit = "tok"; })
        .evaluate_every("eval_every", validate)
        .evaluate_at_start()
        .checkpoint_every("checkpoint_every")
        .finish(save);
}
